// A book as plain text -> its prose paragraphs, for `--input-format book` (prep, vocab,
// tokenize): BooksCorpus is the other half of BERT's pretraining text and cannot be had any
// more; Project Gutenberg's plain-text books are the usual stand-in (GluonNLP's BERT scripts
// offer them). Such a file is one document, hard-wrapped at about 70 columns, paragraphs
// between blank lines, wrapped in Project Gutenberg's header and licence. The rules (each
// checked on real books; docs/data-format.md "Books"):
//  - CRLF and a byte order mark are read as plain newlines and nothing;
//  - Project Gutenberg's header (through "*** START OF THE/THIS PROJECT GUTENBERG EBOOK", or an
//    old "*END*THE SMALL PRINT" / "*END THE SMALL PRINT" line) and footer (from "*** END OF ...
//    PROJECT GUTENBERG", or a line starting "End of the/this Project Gutenberg" or "End of
//    Project Gutenberg") are dropped, and the transcriber's credit ("Produced by ...") when it
//    is the first paragraph left; a file without them is read whole;
//  - a paragraph's lines are joined by one space (a word broken at a line's end, "sheep-" and
//    "bells", is joined whole), but verse keeps its lines: 3+ lines, all but the last shorter
//    than 3/4 of the book's line width (its lines' 90th percentile);
//  - dropped: "[Illustration ...]", "[Footnote ...]" and "[Sidenote ...]" notes (a blank line
//    inside one too, when the next paragraph closes it), sidenotes between black diamonds, the
//    _italics_ and =bold= marks at words' edges; headings (ASCII capitals without lower case,
//    outnumbering other scripts' characters; "Chapter 1", "Book Two", "Capítulo primero...")
//    and the title-case line right under one ("Loomings.", "By Jane Austen"); contents and index
//    paragraphs (half their lines end in a page number after 3+ spaces, dot leaders or a comma)
//    and runs of 5+ short paragraphs that end no sentence (lists of chapter titles); notes on
//    the edition ("Transcriber's Notes ..."); paragraphs with no letter ("* * *", "1.").
// Linear in the input; bytes that are none of this, invalid UTF-8 included, pass through.
#pragma once

#include <string>
#include <string_view>

namespace lansbert {

// The book's paragraphs, one per line, joined by '\n': no empty line, no space at either end
// of a line, no trailing '\n'; "" when nothing is left.
std::string book_to_plain(std::string_view text);

}  // namespace lansbert
