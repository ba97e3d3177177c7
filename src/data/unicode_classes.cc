// Unicode 16.0 classes on PCRE2 10.42 (unicode_classes.h). The *Added tables are the output
// of scripts/unicode-class-additions.mjs, pasted unchanged (less kMarksAdded, which no pattern
// uses on its own: marks enter the patterns only through the run classes).
#include "data/unicode_classes.h"

namespace trident::data::unicode_classes {
namespace {

// kLetters (Letter): 9272 added, 0 removed
constexpr const char* kLettersAdded =
    R"(\x{1C89}-\x{1C8A}\x{A7CB}-\x{A7CD}\x{A7DA}-\x{A7DC}\x{105C0}-\x{105F3})"
    R"(\x{10D4A}-\x{10D65}\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{1123F}-\x{11240})"
    R"(\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5}\x{113B7}\x{113D1}\x{113D3})"
    R"(\x{11BC0}-\x{11BE0}\x{11F02}\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F})"
    R"(\x{13441}-\x{13446}\x{13460}-\x{143FA}\x{16100}-\x{1611D}\x{16D40}-\x{16D6C}\x{18CFF})"
    R"(\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB})"
    R"(\x{1E5D0}-\x{1E5ED}\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";
// kNumbers (Number): 120 added, 0 removed
constexpr const char* kNumbersAdded =
    R"(\x{10D40}-\x{10D49}\x{116D0}-\x{116E3}\x{11BF0}-\x{11BF9}\x{11F50}-\x{11F59})"
    R"(\x{16130}-\x{16139}\x{16D70}-\x{16D79}\x{1CCF0}-\x{1CCF9}\x{1D2C0}-\x{1D2D3})"
    R"(\x{1E4F0}-\x{1E4F9}\x{1E5F1}-\x{1E5FA})";
// kUpperLike (Uppercase_Letter | Titlecase_Letter | Modifier_Letter | Other_Letter | Mark): 9334
// added, 0 removed
constexpr const char* kUpperLikeAdded =
    R"(\x{897}\x{CF3}\x{ECE}\x{1C89}\x{A7CB}-\x{A7CC}\x{A7DA}\x{A7DC}\x{105C0}-\x{105F3})"
    R"(\x{10D4A}-\x{10D65}\x{10D69}-\x{10D6D}\x{10D6F}\x{10EC2}-\x{10EC4}\x{10EFC}-\x{10EFF})"
    R"(\x{1123F}-\x{11241}\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5})"
    R"(\x{113B7}-\x{113C0}\x{113C2}\x{113C5}\x{113C7}-\x{113CA}\x{113CC}-\x{113D3})"
    R"(\x{113E1}-\x{113E2}\x{11BC0}-\x{11BE0}\x{11F00}-\x{11F10}\x{11F12}-\x{11F3A})"
    R"(\x{11F3E}-\x{11F42}\x{11F5A}\x{1342F}\x{13440}-\x{13455}\x{13460}-\x{143FA})"
    R"(\x{16100}-\x{1612F}\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155}\x{1E030}-\x{1E06D})"
    R"(\x{1E08F}\x{1E4D0}-\x{1E4EF}\x{1E5D0}-\x{1E5F0}\x{2B739}\x{2EBF0}-\x{2EE5D})"
    R"(\x{31350}-\x{323AF})";
// kLowerLike (Lowercase_Letter | Modifier_Letter | Other_Letter | Mark): 9338 added, 0 removed
constexpr const char* kLowerLikeAdded =
    R"(\x{897}\x{CF3}\x{ECE}\x{1C8A}\x{A7CD}\x{A7DB}\x{105C0}-\x{105F3}\x{10D4A}-\x{10D4F})"
    R"(\x{10D69}-\x{10D6D}\x{10D6F}-\x{10D85}\x{10EC2}-\x{10EC4}\x{10EFC}-\x{10EFF})"
    R"(\x{1123F}-\x{11241}\x{11380}-\x{11389}\x{1138B}\x{1138E}\x{11390}-\x{113B5})"
    R"(\x{113B7}-\x{113C0}\x{113C2}\x{113C5}\x{113C7}-\x{113CA}\x{113CC}-\x{113D3})"
    R"(\x{113E1}-\x{113E2}\x{11BC0}-\x{11BE0}\x{11F00}-\x{11F10}\x{11F12}-\x{11F3A})"
    R"(\x{11F3E}-\x{11F42}\x{11F5A}\x{1342F}\x{13440}-\x{13455}\x{13460}-\x{143FA})"
    R"(\x{16100}-\x{1612F}\x{16D40}-\x{16D6C}\x{18CFF}\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A})"
    R"(\x{1E030}-\x{1E06D}\x{1E08F}\x{1E4D0}-\x{1E4EF}\x{1E5D0}-\x{1E5F0}\x{2B739})"
    R"(\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})";

}  // namespace

std::string white_space() {
  return R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F})"
         R"(\x{205F}\x{3000})";
}
std::string letters() {
  return std::string(R"(\p{L})") + kLettersAdded;
}
std::string numbers() {
  return std::string(R"(\p{N})") + kNumbersAdded;
}
std::string upper_like() {
  return std::string(R"(\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M})") + kUpperLikeAdded;
}
std::string lower_like() {
  return std::string(R"(\p{Ll}\p{Lm}\p{Lo}\p{M})") + kLowerLikeAdded;
}

}  // namespace trident::data::unicode_classes
