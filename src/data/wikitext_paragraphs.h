// Pass 3 of the wikitext cleaner (wikitext.h), in a file of its own: lines of cleaned wikitext
// (a blank line between paragraphs) -> one line per paragraph, character references decoded,
// spaces collapsed, leftovers of removed markup tidied, paragraphs without a letter or digit
// dropped.
#pragma once

#include <string>
#include <string_view>

namespace lansbert {

std::string wikitext_paragraphs(std::string_view lines);

}  // namespace lansbert
