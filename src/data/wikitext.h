// MediaWiki wikitext -> plain prose, for `lansbert prep` on a Wikipedia XML dump. BERT's paper
// (sec. 3.1) keeps "only the text passages and ignore[s] lists, tables, and headers", so the
// cleaner keeps paragraphs of running text and drops everything else, in three linear passes:
//  1. Comments; extension elements dropped with their content (ref, math, pre, gallery, table,
//     ...); <nowiki> content escaped as character references so that it stays literal; any
//     other tag MediaWiki knows dropped with its content kept, <br> as a space; an unknown
//     "<name>" is text, as MediaWiki shows it.
//  2. Line rules on the lines as written: headings dropped (and whole sections such as
//     References or External links), list lines ("*", "#", ";", ":*") dropped, ":" lines kept
//     without the colons, "----" dropped, {| tables |} dropped. Inline: {{templates}} dropped
//     at any depth but for those whose text is prose ({{convert}}, {{lang}}, {{ndash}} ...:
//     wikitext_templates.h), [[links]] shown by their label (File/Image/Media/Category and
//     interlanguage links dropped), [url label] shown by its label, bare URLs, '' and ''' and
//     __SWITCHES__ dropped.
//  3. Per paragraph (wikitext_paragraphs.h; blank lines and dropped lines end one, its lines
//     are joined by a space): character references decoded (only now, so "&lt;ref&gt;" is
//     text), spaces collapsed, leftovers such as "( ; )" and " ," tidied, and a paragraph with
//     no letter or digit dropped.
// A #REDIRECT page, and a disambiguation or set-index page, give "". Nesting is matched with
// stacks, not recursion (link labels and shown template arguments recurse, capped), and
// searches are cached, so time stays linear on any input; bytes that are not markup, invalid
// UTF-8 included, pass through unchanged.
#pragma once

#include <string>
#include <string_view>

namespace lansbert {

// One article's wikitext -> its prose paragraphs, one per line, joined by '\n': no empty line,
// no space at either end of a line, no trailing '\n'; "" when nothing is left.
std::string wikitext_to_plain(std::string_view wikitext);

}  // namespace lansbert
