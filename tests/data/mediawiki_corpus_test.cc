// bzip2 corpora and MediaWiki XML exports through CorpusFile and TextDocumentReader: bzip2,
// one stream or several, gives the text that plain files give, and damage, a cut or bytes
// after it are corrupt naming the file; an export gives one document per article (namespace
// 0, no redirects, the last revision), its wikitext made prose; XML that is not an export is
// refused naming the file, line and column; "auto" knows Wikipedia's dump names.
#include <bzlib.h>
#include <gtest/gtest.h>

#include "corpus_test_fixture.h"

namespace lansbert {
namespace {

class MediaWikiCorpusTest : public CorpusTestBase {
 protected:
  // One bzip2 stream per part, one after another (as pbzip2 and Wikipedia's multistream
  // dumps are made).
  static std::string bz2_bytes(const std::vector<std::string>& parts) {
    std::string out;
    for (const std::string& part : parts) {
      std::string stream(part.size() + part.size() / 100 + 600, '\0');
      auto n = unsigned(stream.size());
      EXPECT_EQ(BZ2_bzBuffToBuffCompress(stream.data(), &n, const_cast<char*>(part.data()),
                                         unsigned(part.size()), 9, 0, 0),
                BZ_OK);
      out += stream.substr(0, n);
    }
    return out;
  }
};

const char* kText =
    "First doc. Its second sentence.\nA paragraph line.\n\n\nSecond doc here!\r\n \nThird, no "
    "newline";

TEST_F(MediaWikiCorpusTest, Bzip2OneStreamOrManyGivesThePlainText) {
  const auto want = documents({write("a.txt", kText)});
  ASSERT_EQ(want.size(), 3u);
  const std::string text(kText);
  EXPECT_EQ(documents({write("a.txt.bz2", bz2_bytes({text}))}), want);
  EXPECT_EQ(documents({write("b.txt.bz2",
                             bz2_bytes({text.substr(0, 7), text.substr(7, 30), text.substr(37)}))}),
            want);
  // Big enough for several 900 kB blocks and many reads: every byte comes back.
  std::string big;
  for (int i = 0; big.size() < (3u << 20); ++i)
    big += "line " + std::to_string(int64_t(i) * 7919 % 100003) + "\n";
  std::vector<std::string> got;
  ASSERT_TRUE(units(write("big.txt.bz2", bz2_bytes({big.substr(0, 1 << 20), big.substr(1 << 20)})),
                    {}, &got)
                  .is_ok());
  std::string joined;
  for (const std::string& line : got) joined += line + "\n";
  EXPECT_EQ(joined, big);
}

TEST_F(MediaWikiCorpusTest, Bzip2DamageIsCorruptNamingTheFile) {
  const std::string bz = bz2_bytes({std::string(kText) + "\n", std::string(200000, 'q') + "\n"});
  std::vector<std::string> got;
  Status st = units(write("cut.txt.bz2", bz.substr(0, bz.size() - 5)), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("cut.txt.bz2: cannot read after line "), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("unexpected end of file"), std::string::npos) << st.message();
  const std::string first = bz2_bytes({std::string(kText) + "\n"});
  ASSERT_LT(first.size() + 30, bz.size());  // so the second flip is in the second stream
  for (const size_t at : {size_t(30), bz.size() - 20}) {
    std::string flipped = bz;
    flipped[at] ^= 0x55;
    got.clear();
    st = units(write("flip.txt.bz2", flipped), {}, &got);
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << at << ": " << st.to_string();
    EXPECT_NE(st.message().find("flip.txt.bz2: cannot read after line "), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("bzip2 data error"), std::string::npos) << st.message();
  }
  got.clear();
  st = units(write("tail.txt.bz2", bz + "trailing text\n"), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(
      st.message().find("bytes after the end of the bzip2 data that are not another bzip2 stream"),
      std::string::npos)
      << st.message();
  got.clear();  // "BZ" and then not "h": caught at the third byte, by lansbert's check
  st = units(write("bz.txt.bz2", bz + "BZx"), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("not another bzip2 stream"), std::string::npos) << st.message();
}

// An export as Special:Export and the dumps write it: siteinfo first, then pages.
std::string page(const std::string& title, int ns, const std::string& body,
                 const std::string& extra = "") {
  return "  <page>\n    <title>" + title + "</title>\n    <ns>" + std::to_string(ns) +
         "</ns>\n    <id>7</id>\n" + extra +
         "    <revision>\n      <id>70</id>\n      "
         "<contributor><username>Ed</username></contributor>\n" +
         "      <text bytes=\"9\" xml:space=\"preserve\">" + body +
         "</text>\n    </revision>\n  </page>\n";
}
std::string dump(const std::string& pages) {
  return "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.11/\" version=\"0.11\" "
         "xml:lang=\"en\">\n"
         "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <namespaces>\n"
         "      <namespace key=\"0\" case=\"first-letter\" />\n"
         "      <namespace key=\"1\" case=\"first-letter\">Talk</namespace>\n    </namespaces>\n  "
         "</siteinfo>\n" +
         pages + "</mediawiki>\n";
}

TEST_F(MediaWikiCorpusTest, AnExportGivesOneDocumentPerArticle) {
  const std::string xml =
      dump(page("Cat", 0,
                "'''Cats''' are small [[mammal]]s. They purr.\n\nA second paragraph &amp; more.") +
           page("Talk:Cat", 1, "A talk page is no article.") +
           page("Kitty", 0, "#REDIRECT [[Cat]]", "    <redirect title=\"Cat\" />\n") +
           page("List of cats", 0, "* Tom\n* Felix") +  // nothing left: skipped
           "  <page>\n    <title>Dog</title>\n    <ns>0</ns>\n    <id>9</id>\n"
           "    <revision><id>1</id><text>An old revision.</text></revision>\n"
           "    <revision><id>2</id><text>Dogs bark.&lt;ref&gt;A source.&lt;/ref&gt; "
           "Loudly.</text></revision>\n"
           "  </page>\n" +
           page("Empty", 0, ""));
  const std::vector<std::vector<std::string>> want = {
      {"Cats are small mammals.", "They purr.", "A second paragraph & more."},
      {"Dogs bark.", "Loudly."}};
  EXPECT_EQ(documents({write("wiki.xml", xml)}), want);
  EXPECT_EQ(
      documents({write("enwiki-20240601-pages-articles1.xml-p1p41242.bz2", bz2_bytes({xml}))}),
      want);
  EXPECT_EQ(documents({write("split.xml.bz2", bz2_bytes({xml.substr(0, 100), xml.substr(100)}))}),
            want);
  // Units are articles' prose, a paragraph a line; line_no() is the line of the <page> tag.
  std::vector<std::string> got;
  std::vector<int64_t> lines;
  ASSERT_TRUE(units(write("x.xml", xml), {}, &got, &lines).is_ok());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "Cats are small mammals. They purr.\nA second paragraph & more.",
                     "Dogs bark. Loudly."}));
  EXPECT_EQ(lines, (std::vector<int64_t>{9, 53}));
  // Any name is read as an export with --input-format mediawiki.
  got.clear();
  ASSERT_TRUE(units(write("wiki.dat", xml), {"mediawiki", "text"}, &got).is_ok());
  EXPECT_EQ(got.size(), 2u);
}

TEST_F(MediaWikiCorpusTest, PagesLongerThanAReadComeWhole) {
  std::string body, pages;
  for (int i = 0; body.size() < (3u << 20); ++i)
    body += "Sentence number " + std::to_string(i) + " is here. ";
  for (int i = 0; i < 3; ++i) pages += page("Long " + std::to_string(i), 0, body);
  std::vector<std::string> got;
  ASSERT_TRUE(units(write("long.xml.bz2", bz2_bytes({dump(pages)})), {}, &got).is_ok());
  ASSERT_EQ(got.size(), 3u);
  body.pop_back();  // the prose has no trailing space
  for (const std::string& text : got) EXPECT_EQ(text, body);
}

TEST_F(MediaWikiCorpusTest, XmlThatIsNotAnExportIsCorruptNamingTheLineAndColumn) {
  std::vector<std::string> got;
  Status st =
      units(write("page.xml", "<?xml version=\"1.0\"?>\n<html><body>Hi</body></html>\n"), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(
      st.message().find(
          "page.xml:2:1: not a MediaWiki XML export: its root element is <html>, not <mediawiki>"),
      std::string::npos)
      << st.message();
  st = units(write("empty_root.xml", "<rss/>\n"), {}, &got);  // expat still ends the element
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("empty_root.xml:1:1: not a MediaWiki XML export: its root element is <rss>"),
            std::string::npos)
      << st.message();
  st = units(write("bad.xml", dump(page("A", 0, "Fine text.")) + "<page>"), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("bad.xml:20:1: not well-formed XML: junk after document element"),
            std::string::npos)
      << st.message();
  got.clear();  // cut short: the articles before the cut were handed out
  const std::string whole = dump(page("A", 0, "Fine text.") + page("B", 0, "More text."));
  st = units(write("cut.xml", whole.substr(0, whole.size() - 40)), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(st.message().find("cut.xml:"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("not well-formed XML: no element found"), std::string::npos)
      << st.message();
  EXPECT_EQ(got, std::vector<std::string>{"Fine text."});
  // Invalid UTF-8 is the XML's error, found by expat.
  st = units(write("utf8.xml", dump(page("A", 0, "Bad \xff byte."))), {}, &got);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.to_string();
  EXPECT_NE(
      st.message().find("utf8.xml:16:48: not well-formed XML: not well-formed (invalid token)"),
      std::string::npos)
      << st.message();
}

TEST_F(MediaWikiCorpusTest, AutoKnowsDumpNamesAndRefusesXmlItWouldReadAsText) {
  const CorpusOptions autod;
  EXPECT_EQ(corpus_format_of("wiki.xml", autod), CorpusFormat::kMediaWiki);
  EXPECT_EQ(corpus_format_of("enwiki-latest-pages-articles.xml.bz2", autod),
            CorpusFormat::kMediaWiki);
  EXPECT_EQ(corpus_format_of("enwiki-20240601-pages-articles-multistream1.xml-p1p41242.bz2", autod),
            CorpusFormat::kMediaWiki);
  EXPECT_EQ(corpus_format_of("X.XML.ZST", autod), CorpusFormat::kMediaWiki);
  EXPECT_EQ(corpus_format_of("notes.xml-pages.txt", autod), CorpusFormat::kText);
  EXPECT_EQ(corpus_format_of("a.xml-p1p2x", autod), CorpusFormat::kText);
  EXPECT_EQ(corpus_format_of("x.txt.bz2", autod), CorpusFormat::kText);
  EXPECT_EQ(corpus_format_of("x.jsonl.bz2", autod), CorpusFormat::kJsonl);
  EXPECT_EQ(corpus_format_of("wiki.xml", {"text", "text"}), CorpusFormat::kText);
  EXPECT_EQ(check_corpus_options({"xml", "text"}).message(),
            "--input-format xml: expected auto, text, jsonl, mediawiki or book");
  const std::string named_text = write("dump.txt", "\n  <mediawiki xmlns=\"x\">\n</mediawiki>\n");
  std::vector<std::string> got;
  const Status st = units(named_text, autod, &got);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find(
                "dump.txt:2: XML in a file read as text (--input-format auto, by its name): pass "
                "--input-format mediawiki to read it as a MediaWiki export"),
            std::string::npos)
      << st.message();
  got.clear();
  ASSERT_TRUE(units(named_text, {"text", "text"}, &got).is_ok());
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(units(write("bom.txt", "\xEF\xBB\xBF<?xml version=\"1.0\"?>\n<mediawiki/>\n"), autod, &got).code(),
            StatusCode::kInvalidArgument);
  got.clear();
  ASSERT_TRUE(units(write("lt.txt", "<3 is a heart.\n"), autod, &got).is_ok());  // a '<' is not XML
  EXPECT_EQ(got.size(), 1u);
}

}  // namespace
}  // namespace lansbert
