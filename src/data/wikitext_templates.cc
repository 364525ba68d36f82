// The prose templates (see wikitext_templates.h): tables of names, each with how it shows.
#include "wikitext_templates.h"

#include <algorithm>
#include <string>

#include "wikitext_chars.h"

namespace lansbert {
namespace {

// A template name as MediaWiki compares it, roughly: "Template:" prefix, '_' and case aside.
std::string normalize(std::string_view name) {
  std::string n;
  for (char c : name) {
    // MediaWiki trims a template's name and reads '_' as a space: "{{\n convert|...}}" is {{convert}}.
    const char l = c == '_' || wikitext::is_space(c) ? ' ' : wikitext::lower(c);
    if (l == ' ' && (n.empty() || n.back() == ' ')) continue;
    n += l;
  }
  while (!n.empty() && n.back() == ' ') n.pop_back();
  if (n.starts_with("template:")) n.erase(0, 9);
  while (!n.empty() && n.front() == ' ') n.erase(0, 1);
  return n;
}

struct Text {
  std::string_view name, text;
};
// Characters and spacing, as rendered (a no-break space is a space here).
constexpr Text kCharacters[] = {
    {"ndash", "\u2013"},    {"en dash", "\u2013"}, {"mdash", "\u2014"},  {"em dash", "\u2014"},
    {"mdashb", "\u2014"},   {"snd", " \u2013 "},   {"spnd", " \u2013 "}, {"spaced ndash", " \u2013 "},
    {"spaced en dash", " \u2013 "},                {"nbsp", " "},        {"thinsp", " "},
    {"spaces", " "},        {"space", " "},        {"\u00b7", " \u00b7 "}, {"dot", " \u00b7 "},
    {"\u2022", " \u2022 "}, {"bull", " \u2022 "},  {"!", "|"},           {"'s", "'s"},
    {"'", "'"},             {"=", "="},            {"-", "-"},           {"colon", ":"},
    {"circa", "c. "},       {"c.", "c. "},         {"ca.", "c. "},       {"nbhyph", "-"},
    {"minus", "\u2212"},    {"times", "\u00d7"},
};

// Templates that show one of their arguments: 1-based positional index, 0 for the last.
struct Shown {
  std::string_view name;
  int index;
};
constexpr Shown kShown[] = {
    {"lang", 2},       {"langx", 2},      {"script", 2},      {"native name", 2}, {"transl", 0},
    {"transliteration", 0},               {"nowrap", 1},      {"nobr", 1},        {"nobreak", 1},
    {"small", 1},      {"smaller", 1},    {"big", 1},         {"larger", 1},      {"vanchor", 1},
    {"nihongo", 1},    {"abbr", 1},       {"mvar", 1},        {"math", 1},        {"em", 1},
    {"strong", 1},     {"var", 1},        {"smallcaps", 1},   {"small caps", 1},  {"sc", 1},
    {"not a typo", 1}, {"notatypo", 1},   {"sic", 0},         {"ill", 1},         {"interlanguage link", 1},
    {"visible anchor", 1},                {"quote", 1},       {"blockquote", 1},  {"quotation", 1},
    {"cquote", 1},     {"quote frame", 1}, {"chem2", 1},      {"noitalic", 1},
};

constexpr std::string_view kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                        "July",    "August",   "September", "October", "November", "December"};

std::string_view named(const TemplateArgs& a, std::string_view key) {
  for (const auto& [k, v] : a.named)
    if (k == key) return v;
  return {};
}

void literal(std::string_view s, std::vector<TemplatePiece>* out) { out->push_back({s, false, {}}); }
void arg(std::string_view s, std::vector<TemplatePiece>* out) { out->push_back({{}, true, s}); }

// {{convert|60|and(-)|80|kg|...}}: the value(s) and the unit as written ("60–80 kg").
bool convert(const TemplateArgs& a, std::vector<TemplatePiece>* out) {
  const auto& p = a.positional;
  if (p.size() < 2) return false;
  struct Range {
    std::string_view sep, shown;
  };
  static constexpr Range kRanges[] = {{"-", "\u2013"},        {"\u2013", "\u2013"}, {"and(-)", "\u2013"},
                                      {"to(-)", "\u2013"},    {"to", " to "},       {"and", " and "},
                                      {"or", " or "},         {"by", " by "},       {"x", " \u00d7 "},
                                      {"\u00d7", " \u00d7 "}, {"+/-", " \u00b1 "},  {"\u00b1", " \u00b1 "}};
  arg(p[0], out);
  size_t unit = 1;
  for (const Range& r : kRanges)
    if (p.size() >= 4 && p[1] == r.sep) {
      literal(r.shown, out);
      arg(p[2], out);
      unit = 3;
      break;
    }
  literal(" ", out);
  arg(p[unit], out);
  return true;
}

// {{as of|2008|5}}: "As of May 2008"; alt= replaces it.
bool as_of(const TemplateArgs& a, std::vector<TemplatePiece>* out) {
  if (const std::string_view alt = named(a, "alt"); !alt.empty()) return arg(alt, out), true;
  if (a.positional.empty()) return false;
  literal(named(a, "lc") == "y" ? "as of " : "As of ", out);
  if (a.positional.size() >= 2) {
    int m = 0;
    for (char c : a.positional[1]) m = c >= '0' && c <= '9' && m < 100 ? m * 10 + (c - '0') : 100;
    if (m >= 1 && m <= 12) literal(kMonths[m - 1], out), literal(" ", out);
  }
  arg(a.positional[0], out);
  return true;
}

// What template `name_as_written` shows, before the check for empty arguments.
bool render(std::string_view name_as_written, const TemplateArgs& a, std::vector<TemplatePiece>* out) {
  out->clear();
  const std::string name = normalize(name_as_written);
  const auto& p = a.positional;
  for (const Text& t : kCharacters)
    if (name == t.name) return literal(t.text, out), true;
  if (name == "convert" || name == "cvt") return convert(a, out);
  if (name == "as of") return as_of(a, out);
  if (name == "val") {  // {{val|1.23|u=kg}}, {{val|6.022|e=23}}: 6.022 × 10^23
    if (p.empty()) return false;
    arg(p[0], out);
    if (const std::string_view e = named(a, "e"); !e.empty()) literal(" \u00d7 10^", out), arg(e, out);
    for (std::string_view key : {"u", "ul"})
      if (const std::string_view unit = named(a, key); !unit.empty()) literal(" ", out), arg(unit, out);
    return true;
  }
  if (name == "frac" || name == "fraction") {  // {{frac|2}} 1/2, {{frac|1|2}}, {{frac|3|1|2}} 3 1/2
    if (p.empty() || p.size() > 3) return false;
    if (p.size() == 1) return literal("1/", out), arg(p[0], out), true;
    if (p.size() == 3) arg(p[0], out), literal(" ", out);
    arg(p[p.size() - 2], out), literal("/", out), arg(p[p.size() - 1], out);
    return true;
  }
  if (name == "chem") {  // {{chem|H|2|O}}: H2O
    for (std::string_view part : p) arg(part, out);
    return !p.empty();
  }
  if (name.starts_with("lang-")) return p.empty() ? false : (arg(p[0], out), true);
  for (const Shown& s : kShown) {
    if (name != s.name) continue;
    // The text may come as text= or quote= (quotes do that; any of these may).
    for (std::string_view key : {"text", "quote"})
      if (const std::string_view t = named(a, key); !t.empty()) return arg(t, out), true;
    const size_t k = s.index == 0 ? p.size() : size_t(s.index);
    if (k == 0 || k > p.size()) return false;
    return arg(p[k - 1], out), true;
  }
  return false;
}

}  // namespace

bool render_template(std::string_view name, const TemplateArgs& args, std::vector<TemplatePiece>* out) {
  // An argument it would show that is empty ({{convert||m}}) leaves stray units or signs:
  // the template goes as a whole.
  const bool shown = render(name, args, out) &&
                     std::none_of(out->begin(), out->end(), [](const TemplatePiece& p) { return p.is_arg && p.arg.empty(); });
  if (!shown) out->clear();
  return shown;
}

bool is_disambiguation_page(std::string_view w) {
  static constexpr std::string_view kNames[] = {
      "disambiguation",      "disambig",          "dab",         "disamb",
      "hndis",               "geodis",            "numberdis",   "surname",          "given name",
      "set index article",   "sia",               "ship index",  "mountain index",   "road index",
      "sport index",         "schooldis",         "school disambiguation",           "hospital disambiguation",
      "place name disambiguation",                "mathematical disambiguation",     "molecular formula index",
      "species latin name disambiguation",        "letter-number combination disambiguation",
      "chinese title disambiguation",             "call sign disambiguation",        "human name disambiguation"};
  for (size_t i = w.find("{{"); i != std::string_view::npos; i = w.find("{{", i + 2)) {
    size_t e = i + 2;
    while (e < w.size() && e < i + 64 && w[e] != '|' && w[e] != '}' && w[e] != '{') ++e;
    const std::string name = normalize(w.substr(i + 2, e - i - 2));
    if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames)) return true;
  }
  return false;
}

}  // namespace lansbert
