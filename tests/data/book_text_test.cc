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
  EXPECT_EQ(book_to_plain("CHAPTER I\n\nВ начале XIX века Пётр жил в Москве."), "В начале XIX века Пётр жил в Москве.");
  EXPECT_EQ(book_to_plain("ГЛАВА I\n\nТекст."), "ГЛАВА I\nТекст.");  // a heading in another script stays
  EXPECT_EQ(book_to_plain(""), "");
  EXPECT_EQ(book_to_plain("\n\n\r\n"), "");
  EXPECT_EQ(book_to_plain("An [Illustration: unclosed note\nruns to the end.\n\nNext one."), "An\nNext one.");
  EXPECT_EQ(book_to_plain("no newline at the end"), "no newline at the end");
  EXPECT_EQ(book_to_plain("bad \xFF byte\n"), "bad \xFF byte");
  // A start marker with nothing after it, and a footer before any header.
  EXPECT_EQ(book_to_plain("*** START OF THIS PROJECT GUTENBERG EBOOK X ***"), "");
  EXPECT_EQ(book_to_plain("Body text.\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\nLicence.\n"), "Body text.");
}

// Rules found on real books (a reviewer's run over five Project Gutenberg texts): the old
// header with a space, contents and index pages, chapter titles under their headings, notes
// about the edition, sidenotes and bold marks, a note with a blank line inside, verse, and
// words broken at a line's end.
TEST(BookText, RulesFromRealBooks) {
  const std::string prose =
      "The whale surfaced beside the ship in the grey light of an early dawn, and\n"
      "the men stood still upon the deck and watched it breathe for a long time\n"
      "before anyone spoke a word of what they had all seen that cold morning.\n";
  EXPECT_EQ(book_to_plain("Small print.\n*END THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n" + prose +
                          "\nEnd of this Project Gutenberg etext of Moby Dick\n"),
            book_to_plain(prose));
  const std::string contents =
      "CONTENTS\n\nThe Monarchy in France                  1\nSocial condition of France           3\n"
      "Feudal rights ......... 4\n\nMalouet, 52\nMarat, 60, 61\n\n";
  EXPECT_EQ(book_to_plain(contents + prose), book_to_plain(prose));
  EXPECT_EQ(book_to_plain("Tasa\n\nEl Rey\n\nPr\xC3\xB3logo\n\nThe Sea and the Sky\n\nA Long Chapter Title\n\n" + prose),
            book_to_plain(prose));  // five list entries in a row
  EXPECT_EQ(book_to_plain("A Short Line\n\nAnother Line\n\n" + prose),
            "A Short Line\nAnother Line\n" + book_to_plain(prose));  // two are not a list
  EXPECT_EQ(book_to_plain("CHAPTER 1\n\nLoomings.\n\nCall me Ishmael.\n\nChapter 2\n\nThe Carpet-Bag.\n\n"
                          "Chapter of accidents, he said.\n"),
            "Call me Ishmael.\nChapter of accidents, he said.");
  EXPECT_EQ(book_to_plain("Call me Ishmael.\n"), "Call me Ishmael.");
  EXPECT_EQ(book_to_plain("Transcriber's Notes: Italic text is enclosed in underscores.\n\n" + prose),
            book_to_plain(prose));
  EXPECT_EQ(book_to_plain("It was feudal. \xE2\x99\xA6" "Feudal rights.\xE2\x99\xA6 These =rights= were old, and a=b stays.\n"),
            "It was feudal. These rights were old, and a=b stays.");
  EXPECT_EQ(book_to_plain("[Illustration: CENTRAL EUROPE 1789\n\n_Longmans, Green & Co._]\n\n" + prose),
            book_to_plain(prose));
  // Verse keeps its lines (each a line of the document); prose lines are joined, a word broken
  // at a line's end whole with its hyphen, a dash kept apart.
  EXPECT_EQ(book_to_plain(prose + "\nHow doth the little crocodile\n  Improve his shining tail,\nAnd pour the waters "
                                  "of the Nile\n  On every golden scale!\n\n"
                                  "Far over the quiet fields of the valley below the old farm the sheep-\n"
                                  "bells rang all through the long evening, and the shepherd waited--\n"
                                  "the dogs beside him--until the last of the light had gone away.\n"),
            book_to_plain(prose) +
                "\nHow doth the little crocodile\nImprove his shining tail,\nAnd pour the waters of the Nile\n"
                "On every golden scale!\nFar over the quiet fields of the valley below the old farm the sheep-bells "
                "rang all through the long evening, and the shepherd waited-- the dogs beside him--until the last of "
                "the light had gone away.");
}

}  // namespace
}  // namespace lansbert
