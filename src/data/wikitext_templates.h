// The few templates whose text is prose, for wikitext_to_plain (wikitext.h). Templates are
// not expanded (that needs the whole template namespace of the wiki); most are infoboxes,
// citations, pronunciations or maintenance tags and go. But some carry words of the sentence
// they sit in, and dropping them leaves holes ("a total area of {{convert|28748|km2}}."
// became "a total area of."): characters ({{ndash}}, {{nbsp}}), a foreign-language term
// ({{lang|grc|...}}), a quantity ({{convert}}, {{val}}, {{frac}}), a date ({{as of|2008}}),
// wrappers ({{nowrap|...}}, {{nihongo|...}}, {{quote|...}}). On 110 real enwiki pages (106
// articles; docs/performance.md) they were in about 7% of the prose paragraphs.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

namespace lansbert {

// A template's arguments as written (views into the wikitext, markup and all): the
// positional ones in order, and the named ones (`name=value`, both trimmed).
struct TemplateArgs {
  std::vector<std::string_view> positional;
  std::vector<std::pair<std::string_view, std::string_view>> named;
};

// One piece of what a template shows: `literal` as it is, or, where `arg` is set, that
// argument's wikitext, which the caller cleans as prose.
struct TemplatePiece {
  std::string_view literal;
  bool is_arg = false;
  std::string_view arg;
};

// The pieces template `name` (as written between "{{" and the first '|') shows in running
// text, into *out; false (and nothing) for a template whose text is no prose.
bool render_template(std::string_view name, const TemplateArgs& args, std::vector<TemplatePiece>* out);

// Whether the page is a disambiguation or set-index page ({{disambiguation}}, {{hndis}},
// {{surname}}, ...): a list of links to other articles, no prose of its own.
bool is_disambiguation_page(std::string_view wikitext);

}  // namespace lansbert
