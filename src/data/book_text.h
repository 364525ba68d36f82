// A book as plain text -> its prose paragraphs, for `--input-format book` (prep, vocab,
// tokenize): BooksCorpus is the other half of BERT's pretraining text and cannot be had any
// more; Project Gutenberg's plain-text books are the usual stand-in (GluonNLP's BERT scripts
// offer them). Such a file is one document, hard-wrapped at about 70 columns, paragraphs
// between blank lines, wrapped in Project Gutenberg's header and licence. The rules:
//  - CRLF and a byte order mark are read as plain newlines and nothing;
//  - Project Gutenberg's header (through the "*** START OF THE/THIS PROJECT GUTENBERG EBOOK"
//    line, or an old "*END*THE SMALL PRINT" line) and footer (from "*** END OF THE/THIS PROJECT
//    GUTENBERG EBOOK" or a line starting "End of the Project Gutenberg" / "End of Project
//    Gutenberg") are dropped, and the transcriber's credit ("Produced by ...", "E-text prepared
//    by ...", "Transcribed from ...") when it is the first paragraph left; a file without them
//    is read whole;
//  - a paragraph's lines are joined by one space, and runs of blanks made one space;
//  - "[Illustration ...]", "[Footnote ...]" and "[Sidenote ...]" notes are dropped (they may span
//    lines), and the underscores Project Gutenberg marks italics with (_word_) go;
//  - a paragraph is dropped when it has ASCII letters but none lower case (headings: "CHAPTER
//    IV.", "THE END", "CONTENTS"), or no letter or digit at all ("* * * * *"); text in other
//    scripts (bytes >= 0x80) is kept.
// Linear in the input; bytes that are none of this, invalid UTF-8 included, pass through.
#pragma once

#include <string>
#include <string_view>

namespace lansbert {

// The book's paragraphs, one per line, joined by '\n': no empty line, no space at either end
// of a line, no trailing '\n'; "" when nothing is left.
std::string book_to_plain(std::string_view text);

}  // namespace lansbert
