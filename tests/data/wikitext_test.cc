// wikitext_to_plain: one case per cleaning rule, a whole invented article, and hostile input
// (unterminated constructs, deep nesting, random bytes) that must neither crash nor leave
// empty lines or lines with spaces at either end.
#include "../../src/data/wikitext.h"

#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>

namespace lansbert {
namespace {

std::string W(std::string_view s) {
  return wikitext_to_plain(s);
}

// The output contract: no empty line, no space at either end of a line, no '\n' at an end.
void ExpectWellFormed(const std::string& out) {
  EXPECT_EQ(out.find("\n\n"), std::string::npos);
  if (out.empty()) return;
  EXPECT_NE(out.front(), '\n');
  EXPECT_NE(out.back(), '\n');
  size_t start = 0;
  while (start <= out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    ASSERT_GT(end, start);
    EXPECT_NE(out[start], ' ') << out.substr(start, end - start);
    EXPECT_NE(out[end - 1], ' ') << out.substr(start, end - start);
    start = end + 1;
  }
}

TEST(Wikitext, CommentsRemoved) {
  EXPECT_EQ(W("a<!-- x\ny -->b"), "ab");
  EXPECT_EQ(W("one\n<!-- alone on its line -->\ntwo"), "one two");
  EXPECT_EQ(W("kept <!-- never closed\nlost"), "kept");
}

TEST(Wikitext, ElementsRemovedWithContent) {
  EXPECT_EQ(W("A<ref name=\"x\">cite {{a}}</ref> b<REF name=y /> c."), "A b c.");
  EXPECT_EQ(W("x <math display=\"block\">\\frac{a}{b}}}</math> y"), "x y");
  EXPECT_EQ(W("p <Gallery>\nFile:a.jpg|cap\n</gallery> q <pre>code</pre> r"), "p q r");
  EXPECT_EQ(W("s <syntaxhighlight lang=c>int x;</syntaxhighlight >t"), "s t");
  EXPECT_EQ(W("a <table><tr><td>cell</td></tr></table> b"), "a b");
  EXPECT_EQ(W("a <includeonly>hidden</includeonly><noinclude>kept</noinclude> b"), "a kept b");
  // Never closed: only the opening tag goes.
  EXPECT_EQ(W("a <ref>b c"), "a b c");
}

TEST(Wikitext, NowikiKeepsMarkupLiteral) {
  EXPECT_EQ(W("a <nowiki>[[b]] ''c'' {{d}} <i>e</i></nowiki> f"), "a [[b]] ''c'' {{d}} <i>e</i> f");
  EXPECT_EQ(W("<nowiki>* not a list</nowiki>"), "* not a list");
  EXPECT_EQ(W("x<nowiki/>y <nowiki />z"), "xy z");
}

TEST(Wikitext, OtherTagsDroppedContentKept) {
  EXPECT_EQ(W("a <span style=\"x\">b</span> <B>c</B><br>d<br/>e<BR />f</br>g"), "a b c d e f g");
  EXPECT_EQ(W("a < b and <3 and 1<2"), "a < b and <3 and 1<2");
  EXPECT_EQ(W("<div>* not a list</div>\n<span>\n* a list</span>"), "* not a list");
}

TEST(Wikitext, TemplatesRemovedAtAnyDepth) {
  EXPECT_EQ(W("a {{x|{{y|{{{1|z}}}}}|[[q]]}} b"), "a b");
  EXPECT_EQ(W("{{Infobox\n| name = n\n* item\n}}\nProse here."), "Prose here.");
  EXPECT_EQ(W("{{sfn|A|\n2001}}x, y {{#if:a|b|c}}."), "x, y.");
  EXPECT_EQ(W("a {{ b c"), "a b c");   // unmatched: the two braces go
  EXPECT_EQ(W("a {{{x}} b"), "a b");   // a stray brace, then a template
  EXPECT_EQ(W("a {b} c"), "a {b} c");  // single braces are text
}

TEST(Wikitext, TablesRemoved) {
  EXPECT_EQ(W("before\n{| class=wikitable\n|-\n| a || b\n{|\n| nested\n|}\n| c\n|}\nafter"),
            "before\nafter");
  EXPECT_EQ(W("x\n  :{|\n| a\n |}\ny"), "x\ny");
  EXPECT_EQ(W("a {| b |} c"), "a {| b |} c");  // not at a line start: text
  EXPECT_EQ(W("x\n{|\n| never closed\n\nstill table"), "x");
}

TEST(Wikitext, InternalLinks) {
  EXPECT_EQ(W("[[File:a.jpg|thumb|A [[b|c]] caption]] [[ image : b.png]] [[Media:c.ogg]]x"), "x");
  EXPECT_EQ(W("a[[Category:Foo]][[category:Bar|sort]] b"), "a b");
  EXPECT_EQ(W("[[:Category:Foo]] [[:File:x.jpg|a picture]]"), "Category:Foo a picture");
  EXPECT_EQ(W("a [[de:Foo]][[zh-yue:Bar]][[zh-min-nan:Baz]] b"), "a b");
  EXPECT_EQ(W("[[Target|the ''label'' <b>x</b>]]"), "the label x");
  EXPECT_EQ(W("[[Foo (bar)|]] [[Help:Contents|]] [[Plain]] [[apple]]s [[X (y)|]]s"),
            "Foo Contents Plain apples Xs");
  EXPECT_EQ(W("a [[ b c"), "a b c");
  EXPECT_EQ(W("[[wikt:word]]"), "wikt:word");  // four letters: not a language
}

TEST(Wikitext, ExternalLinks) {
  EXPECT_EQ(W("See [https://x.org/a?b=c the ''site''] now."), "See the site now.");
  EXPECT_EQ(W("Cited[http://x.org] [//y.org proto] [mailto:a@b.c mail] [FTP://f.org f]."),
            "Cited proto mail f.");
  EXPECT_EQ(W("He wrote [sic] on [1] page."), "He wrote [sic] on [1] page.");
  EXPECT_EQ(W("Visit http://x.org/path or https://y.org."), "Visit or");
  EXPECT_EQ(W("[http://x.org no close\nnext"), "no close next");  // '[' + URL is markup
}

TEST(Wikitext, BoldItalicQuotes) {
  EXPECT_EQ(W("''a'' '''b''' '''''c''''' ''''d''''"), "a b c 'd'");
  EXPECT_EQ(W("''''''''x"), "'''x");
  EXPECT_EQ(W("don't O'Neil"), "don't O'Neil");
}

TEST(Wikitext, HeadingsAndDroppedSections) {
  EXPECT_EQ(W("Lead.\n== History ==\nBody.\n=== Early ===   \nMore."), "Lead.\nBody.\nMore.");
  EXPECT_EQ(W("A.\n== See also ==\n* x\nGone.\n=== Sub ===\nGone too.\n== Life ==\nKept."),
            "A.\nKept.");
  EXPECT_EQ(W("A.\n==References==\n{{reflist}}\n== External links ==\nx\n= Top =\nKept."),
            "A.\nKept.");
  EXPECT_EQ(W("=== further READING ===\nx\n== Next ==\ny"), "y");  // higher level ends it
}

TEST(Wikitext, ListsAndIndents) {
  EXPECT_EQ(W("Para.\n* item\n# num\n; term : def\nNext."), "Para.\nNext.");
  EXPECT_EQ(W("* {{cite\n|title=t}}\nProse."), "Prose.");  // a list item's template spans lines
  EXPECT_EQ(W("Para.\n:: indented ''text''\nNext."), "Para.\nindented text\nNext.");
  EXPECT_EQ(W("{{x}}* starts with a template"), "* starts with a template");
}

TEST(Wikitext, RulesSwitchesAndRedirects) {
  EXPECT_EQ(W("One\n----\nTwo"), "One\nTwo");
  EXPECT_EQ(W("__NOTOC__A __TOC__ b__FORCETOC__. __not__ X_Y"), "A b. __not__ X_Y");
  EXPECT_EQ(W("  #redirect [[Foo]]\nText"), "");
  EXPECT_EQ(W("#REDIRECT[[Foo]]"), "");
}

TEST(Wikitext, CharacterReferencesDecodedLast) {
  EXPECT_EQ(W("&lt;ref&gt;x&lt;/ref&gt; &amp;nbsp; a&nbsp;&nbsp;b"), "<ref>x</ref> &nbsp; a b");
  EXPECT_EQ(W("1&ndash;2 &#8212; &#x41;&#X42; &deg;&Prime;&prime;"),
            "1\xE2\x80\x93"
            "2 \xE2\x80\x94 AB \xC2\xB0\xE2\x80\xB3\xE2\x80\xB2");
  EXPECT_EQ(W("x &#0; &#xD800; &#1114112; &bogus; & y"), "x &#0; &#xD800; &#1114112; &bogus; & y");
}

TEST(Wikitext, ParagraphsAndTidying) {
  EXPECT_EQ(W("one\ntwo  \t three\n\n\nfour"), "one two three\nfour");
  EXPECT_EQ(W("'''X''' (born 1950 ({{IPA|fr|y}}; [[File:x]])) was."), "X (born 1950) was.");
  EXPECT_EQ(W("X ({{IPA|x}}; born 1950) ran {{cn}}, then ( {{a}} ) stopped{{b}} ."),
            "X (born 1950) ran, then stopped.");
  EXPECT_EQ(W("Use .NET now ."), "Use .NET now.");
  EXPECT_EQ(W("{{a}}\n\n!!! ---\n\nText"), "Text");  // no letter or digit: dropped
  EXPECT_EQ(W("\xE2\x80\x94 \xE2\x80\xA2\n\n\xC3\xA9t\xC3\xA9"), "\xC3\xA9t\xC3\xA9");
  EXPECT_EQ(W("a\r\nb \r\n\r\n== H ==\r\nc"), "a b\nc");  // CRLF
}

TEST(Wikitext, WholeArticle) {
  const std::string article =
      "{{Short description|Invented river}}\n"
      "{{Infobox river\n| name = Quillow\n| length = {{convert|42|km}}\n}}\n"
      "The '''Quillow''' (also ''Quillo''; {{lang-xx|Kwilo}}) is a short [[river]] in the "
      "imaginary [[Land of Vell|Vellish]] uplands.<ref>{{cite book|title=Rivers}}</ref> It "
      "rises near [[Mount Ardent (Vell)|]] and\nflows north for 42&nbsp;km.\n\n"
      "== Course ==\n"
      "[[File:Quillow.jpg|thumb|The river in spring]]\n"
      "Below the falls the river widens<!-- check -->; its water is said to be \"cold & "
      "clear\".<ref name=a/>\n"
      "* Upper Quillow\n* Lower Quillow\n\n"
      "{| class=\"wikitable\"\n! Town !! Population\n|-\n| Brell || 900\n|}\n"
      "Fishing is allowed from May&ndash;June.\n\n"
      "== See also ==\n* [[List of rivers]]\n\n"
      "== References ==\n{{Reflist}}\n\n"
      "[[Category:Rivers]]\n[[xx:Quillow]]\n";
  EXPECT_EQ(W(article),
            "The Quillow (also Quillo; Kwilo) is a short river in the imaginary Vellish uplands. It "
            "rises near Mount Ardent and flows north for 42 km.\n"
            "Below the falls the river widens; its water is said to be \"cold & clear\".\n"
            "Fishing is allowed from May\xE2\x80\x93June.");
}

TEST(Wikitext, UnknownTagsAreText) {
  // Only MediaWiki's tags are tags: "<y" in prose must not swallow text up to a later '>'.
  EXPECT_EQ(W("Text x <y and more\n\nNext paragraph here z> done."), "Text x <y and more\nNext paragraph here z> done.");
  EXPECT_EQ(W("a <foo>bar</foo> <Small>b</small> <span\nclass=x>c"), "a <foo>bar</foo> b <span class=x>c");
}

// What removed markup leaves: empty parentheses after a space go, code such as main() stays.
TEST(Wikitext, LeftoverParentheses) {
  EXPECT_EQ(W("He was (,born here) ok ({{IPA|x}}; y)."), "He was (born here) ok (y).");
  EXPECT_EQ(W("Call main() or f( ) in C; Einstein ({{IPA|x}}) was."), "Call main() or f() in C; Einstein was.");
}

TEST(Wikitext, QuoteMarks) {
  // MediaWiki's odd-bold rule: the ''' after a title's closing '' is an apostrophe.
  EXPECT_EQ(W("the ''Iliad'''s hero.\n\n''A Modest Proposal'''s satire"), "the Iliad's hero.\nA Modest Proposal's satire");
  // Both titles in one line make the marks even: no apostrophe, as MediaWiki shows it.
  EXPECT_EQ(W("''Iliad'''s and ''Odyssey'''s"), "Iliads and Odysseys");
  EXPECT_EQ(W("'''Bold''' and ''it'' ok; ''x'' '''y"), "Bold and it ok; x y");  // not both odd
  EXPECT_EQ(W("l'''amour''' and ''a'''"), "l'amour and a");  // after a one-letter word first
  EXPECT_EQ(W("'''Massachusetts Bay'''\n* [[John]]\n\n'''''Both'''''\n\n'''X''' is a '''bay'''."), "X is a bay.");
}

// Templates are not expanded, but those whose text is part of the sentence show it
// (wikitext_templates.h); the rest still go.
TEST(Wikitext, ProseTemplatesShowTheirText) {
  EXPECT_EQ(W("an area of {{convert|28748|km2|0|abbr=off}}. It"), "an area of 28748 km2. It");
  EXPECT_EQ(W("between {{convert|60|and(-)|80|kg}}."), "between 60\xE2\x80\x93" "80 kg.");
  EXPECT_EQ(W("{{cvt|3|to|5|mi}} long"), "3 to 5 mi long");
  EXPECT_EQ(W("from {{lang|grc|[[aegle|\xCE\xB1\xE1\xBC\xB4\xCE\xB3\xCE\xBB\xCE\xB7]]}}, \"light\""),
            "from \xCE\xB1\xE1\xBC\xB4\xCE\xB3\xCE\xBB\xCE\xB7, \"light\"");
  EXPECT_EQ(W("{{Lang-fr|''chat''}} and {{transl|ar|DIN|qit\xE1\xB9\xAD}}"), "chat and qit\xE1\xB9\xAD");
  EXPECT_EQ(W("{{Nihongo|'''Aikido'''|\xE5\x90\x88\xE6\xB0\x97\xE9\x81\x93|Aikid\xC5\x8D|lead=yes}} is an art"),
            "Aikido is an art");
  EXPECT_EQ(W("latitudes [[29th parallel north|{{nowrap|29\xC2\xB0 N}}]] and"), "latitudes 29\xC2\xB0 N and");
  EXPECT_EQ(W("rose.<ref>x</ref> {{as of|2008}}, 40% and {{As of|2010|5|lc=y}}"),
            "rose. As of 2008, 40% and as of May 2010");
  EXPECT_EQ(W("{{val|1.5|u=kg}}, {{frac|1|2}}, {{frac|3|1|4}}, {{chem|H|2|O}}"), "1.5 kg, 1/2, 3 1/4, H2O");
  EXPECT_EQ(W("{{quote|text=To be [[wikt:be|or]] not.|author=W.}}"), "To be or not.");
  EXPECT_EQ(W("{{lang|fr}} {{convert|5}} {{frac}} kept"), "kept");  // no text argument: gone
  EXPECT_EQ(W("{{lang|fr|{{lang|de|{{nowrap|deep}}}}}}"), "deep");
  EXPECT_EQ(W("{{Template:Nowrap|x y}} {{ nowrap |z}}"), "x y z");
  EXPECT_EQ(W("{{\n convert|5|km}} and {{\tnowrap\n|z}} and {{Template:\nlang|fr|oui}}"), "5 km and z and oui");
  EXPECT_EQ(W("{{val|6.022|e=23}} per mole"), "6.022 \xC3\x97 10^23 per mole");
  // Arguments one a line, numbered ones, and empty ones (which drop the whole template).
  EXPECT_EQ(W("{{convert\n|60\n|to\n|80\n|kg}} heavy, {{as of|2008|5\n}}"), "60 to 80 kg heavy, As of May 2008");
  EXPECT_EQ(W("{{lang|fr|2=E=mc2}} and {{lang|de|1=x|2=y}}"), "E=mc2 and y");
  EXPECT_EQ(W("{{nowrap|2=b|a}} and {{convert|2=km|5}} long, {{lang|x|y|2=z}}"), "a and 5 km long, z");
  EXPECT_EQ(W("{{convert||m}} x {{frac||2}} y {{lang|fr|}} z"), "x y z");
  EXPECT_EQ(W("{{IPAc-en|\xCB\x88|k|\xC3\xA6|t}}{{sfn|Smith|2000}}{{citation needed|date=May}} cat"), "cat");
}

TEST(Wikitext, CharacterTemplatesKeepWordsApart) {
  EXPECT_EQ(W("(1775{{ndash}}1783) 2.5{{nbsp}}million, a{{mdashb}}b, away{{snd}}roughly"),
            "(1775\xE2\x80\x93" "1783) 2.5 million, a\xE2\x80\x94" "b, away \xE2\x80\x93 roughly");
  EXPECT_EQ(W("''Iliad''{{'s}} hero{{!}}x {{circa}} 1980"), "Iliad's hero|x c. 1980");
}

TEST(Wikitext, DisambiguationPagesGiveNothing) {
  EXPECT_EQ(W("'''Ada''' may refer to:\n* [[Ada (name)]]\n\n== See also ==\n{{Disambiguation}}"), "");
  EXPECT_EQ(W("'''Smith''' is a surname.\n{{surname|date=May 2020}}"), "");
  EXPECT_EQ(W("'''Ada''' is a language.{{disambiguation needed|date=May}}"), "Ada is a language.");
  EXPECT_EQ(W("See [[Ada (disambiguation)]]. {{about|the language|other uses|Ada (disambiguation)}}Ada is."),
            "See Ada (disambiguation). Ada is.");
}

TEST(Wikitext, IndentedListsEntitiesCodeAndInterwikiLabels) {
  EXPECT_EQ(W("Ada is:\n:* [[Aberdeen]], a place\n::# two\n: kept"), "Ada is:\nkept");
  EXPECT_EQ(W("&eta;2, &Omega;, &sigmaf;, &shy;co&shy;op, &frac12; &le; x, &bogus;"),
            "\xCE\xB7" "2, \xCE\xA9, \xCF\x82, coop, \xC2\xBD \xE2\x89\xA4 x, &bogus;");
  EXPECT_EQ(W("Use the <code>printf</code> function."), "Use the printf function.");
  EXPECT_EQ(W("[[voy:Paris|the guide]] and [[doi:10.1/x|a paper]][[de:Paris]]"), "the guide and a paper");
}

TEST(Wikitext, UnterminatedConstructs) {
  for (std::string_view open : {"{{", "[[", "<ref>", "<!--", "{|", "<nowiki>", "[http://x "}) {
    for (std::string_view where : {"", "Text before. "}) {
      const std::string in = std::string(where) + std::string(open) + "tail words\n\nmore";
      const std::string out = W(in);
      ExpectWellFormed(out);
      if (!where.empty()) {
        EXPECT_EQ(out.rfind("Text before.", 0), 0u) << in;
      }
    }
  }
  EXPECT_EQ(W("a {{ b [[ c <ref> d"), "a b c d");
  EXPECT_EQ(W("a\n{|\nb"), "a");
  EXPECT_EQ(W("a <!-- b"), "a");
}

TEST(Wikitext, DeepNesting) {
  const size_t n = 100000;
  std::string in;
  for (size_t i = 0; i < n; ++i) in += "{{";
  EXPECT_TRUE(W(in + "kept") == "kept");
  EXPECT_TRUE(W(in + "x" + std::string(2 * n, '}') + " after") == "after");
  std::string links;
  for (size_t i = 0; i < n; ++i) links += "[[a|";
  links += "b";
  for (size_t i = 0; i < n; ++i) links += "]]";
  const std::string out = W("x " + links + " y");
  ExpectWellFormed(out);
  EXPECT_TRUE(out == "x y");  // labels nested past the cap are dropped
  std::string tags, text;
  for (size_t i = 0; i < n; ++i) tags += "<ref><b <i>", text += "<b ";
  EXPECT_TRUE(W(tags + "end") == text + "end");  // "<b " is no tag: text (not printed: 400 kB)
}

TEST(Wikitext, RandomBytesAndMarkupSoup) {
  std::mt19937 rng(12345);
  const std::string_view pieces[] = {"{{",
                                     "}}",
                                     "[[",
                                     "]]",
                                     "[",
                                     "]",
                                     "{|",
                                     "|}",
                                     "|",
                                     "\n",
                                     "\n\n",
                                     "'''",
                                     "''",
                                     "<ref>",
                                     "</ref>",
                                     "<!--",
                                     "-->",
                                     "<nowiki>",
                                     "</nowiki>",
                                     "<br/>",
                                     "&nbsp;",
                                     "&#",
                                     ";",
                                     "== H ==",
                                     "==References==",
                                     "* ",
                                     ":",
                                     "http://x.y",
                                     "[http://a b]",
                                     "File:",
                                     "(",
                                     ")",
                                     " , ",
                                     "word",
                                     "\xE2\x80\x94",
                                     "\xFF",
                                     "\x7F",
                                     "__TOC__",
                                     " ",
                                     "<",
                                     ">",
                                     "&amp;"};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string in;
    const int len = static_cast<int>(rng() % 200);
    for (int k = 0; k < len; ++k) {
      if (trial % 2 == 0) {
        in += static_cast<char>(rng() & 0xFF);
      } else {
        in += pieces[rng() % std::size(pieces)];
      }
    }
    const std::string out = W(in);
    ExpectWellFormed(out);
    if (HasFatalFailure() || HasNonfatalFailure()) {
      ADD_FAILURE() << "input #" << trial;
      return;
    }
  }
}

}  // namespace
}  // namespace lansbert
