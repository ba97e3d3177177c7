// The translation unit that builds the test programs' shared precompiled header
// (Note [Test code at -O1], tests/CMakeLists.txt); it has no code of its own.
