// book_to_plain (--input-format book): Project Gutenberg's header, licence and transcriber's
// credit go, wrapped lines become paragraphs, headings, ornaments, illustration and footnote
// notes and italics marks go; a book without a header is read whole; other scripts stay.
#include "../../src/data/book_text.h"

#include <gtest/gtest.h>

#include <string>

namespace lansbert {
namespace {

const char* const kBook =
    "\xEF\xBB\xBFThe Project Gutenberg eBook of A Test, by Nobody\r\n"
    "\r\n"
    "This eBook is for the use of anyone anywhere in the United States and\r\n"
    "most other parts of the world at no cost.\r\n"
    "\r\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK A TEST ***\r\n"
    "\r\n"
    "Produced by Someone and the Online Distributed\r\n"
    "Proofreading Team.\r\n"
    "\r\n"
    "\r\n"
    "                              A TEST\r\n"
    "\r\n"
    "CHAPTER I.\r\n"
    "\r\n"
    "It was a _bright_ cold day in April, and the\r\n"
    "clocks were striking thirteen.   Winston Smith\r\n"
    "hurried home.\r\n"
    "\r\n"
    "[Illustration: The clock\r\n"
    "  tower [drawn] at noon]\r\n"
    "\r\n"
    "He said[Footnote: Or so it seems.] that _snake_case_ stays\r\n"
    "as it is written.\r\n"
    "\r\n"
    "       *       *       *       *       *\r\n"
    "\r\n"
    "1.\r\n"
    "\r\n"
    "THE END\r\n"
    "\r\n"
    "*** END OF THE PROJECT GUTENBERG EBOOK A TEST ***\r\n"
    "\r\n"
    "Updated editions will replace the previous one.\r\n";

TEST(BookText, ProjectGutenbergBook) {
  EXPECT_EQ(book_to_plain(kBook),
            "It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith hurried home.\n"
            "He said that snake_case stays as it is written.");
}

TEST(BookText, WithoutHeaderTheWholeFileAndNoCreditRule) {
  EXPECT_EQ(book_to_plain("Produced by hand, this line is prose.\n\nSecond\nparagraph.\n"),
            "Produced by hand, this line is prose.\nSecond paragraph.");
  // Old headers end with the small print; old footers start "End of the Project Gutenberg".
  EXPECT_EQ(book_to_plain("Licence text.\n*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n"
                          "Call me Ishmael.\n\nEnd of the Project Gutenberg EBook of Moby Dick\nLicence."),
            "Call me Ishmael.");
  EXPECT_EQ(book_to_plain("Text.\n\nEnd of Project Gutenberg's Alice\n"), "Text.");
}

TEST(BookText, OtherScriptsAndEdgeCases) {
  EXPECT_EQ(book_to_plain("Война и мир\n\nГлава первая.\n"), "Война и мир\nГлава первая.");
  EXPECT_EQ(book_to_plain("ГЛАВА I\n\n"), "");  // an ASCII capital and no lower case: a heading
  EXPECT_EQ(book_to_plain(""), "");
  EXPECT_EQ(book_to_plain("\n\n\r\n"), "");
  EXPECT_EQ(book_to_plain("An [Illustration: unclosed note\nruns to the end.\n\nNext one."), "An\nNext one.");
  EXPECT_EQ(book_to_plain("no newline at the end"), "no newline at the end");
  EXPECT_EQ(book_to_plain("bad \xFF byte\n"), "bad \xFF byte");
  // A start marker with nothing after it, and a footer before any header.
  EXPECT_EQ(book_to_plain("*** START OF THIS PROJECT GUTENBERG EBOOK X ***"), "");
  EXPECT_EQ(book_to_plain("Body text.\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nLicence.\n"), "Body text.");
}

}  // namespace
}  // namespace lansbert
