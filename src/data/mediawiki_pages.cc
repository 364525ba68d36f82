// MediaWikiPages: expat's callbacks collect each <page>'s title, namespace, redirect mark
// and last revision text; a page that ends is queued when it is an article (see the header).
#include "mediawiki_pages.h"

#include <expat.h>
#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "text_sources.h"

namespace lansbert {

namespace {
constexpr size_t kBlock = 1 << 20;  // bytes of XML handed to expat at a time
}  // namespace

struct MediaWikiPages::Parser {
  XML_Parser xml = nullptr;
  std::deque<MediaWikiPage>* ready = nullptr;
  std::vector<std::string> path;  // the open elements, root first
  MediaWikiPage page;
  std::string ns, text;
  std::string* capture = nullptr;  // where character data goes, when inside a wanted element
  bool has_ns = false, redirect = false;
  Status error;  // set by a callback that stopped the parser, at `error_line`:`error_column`
  int64_t error_line = 0, error_column = 0;

  Parser() : xml(XML_ParserCreate("UTF-8")) {
    if (!xml) return;
    XML_SetUserData(xml, this);
    XML_SetElementHandler(xml, &Parser::on_start, &Parser::on_end);
    XML_SetCharacterDataHandler(xml, &Parser::on_text);
  }
  ~Parser() {
    if (xml) XML_ParserFree(xml);
  }

  // The element's parent, and its grandparent, among the open ones ("" above the root). A
  // view: no static with a destructor that a reading thread could touch at exit.
  std::string_view up(size_t k) const { return path.size() >= k ? std::string_view(path[path.size() - k]) : ""; }

  static void XMLCALL on_start(void* self_, const XML_Char* name_, const XML_Char** attrs) {
    auto* self = static_cast<Parser*>(self_);
    const std::string name = name_;
    (void)attrs;
    if (self->path.empty() && name != "mediawiki") {
      self->error = Status::corrupt(fmt::format(
          "not a MediaWiki XML export: its root element is <{}>, not <mediawiki>", name));
      self->error_line =
          int64_t(XML_GetCurrentLineNumber(self->xml));  // the tag's, not where expat stops
      self->error_column = int64_t(XML_GetCurrentColumnNumber(self->xml)) + 1;
      XML_StopParser(self->xml, XML_FALSE);
      return;
    }
    const std::string_view parent = self->up(1);  // used before path grows
    if (name == "page" && parent == "mediawiki") {
      self->page = MediaWikiPage{};
      self->page.line = int64_t(XML_GetCurrentLineNumber(self->xml));
      self->page.byte = uint64_t(XML_GetCurrentByteIndex(self->xml));
      self->ns.clear();
      self->text.clear();
      self->has_ns = self->redirect = false;
    } else if (parent == "page" && self->up(2) == "mediawiki") {
      if (name == "title") self->capture = &self->page.title, self->page.title.clear();
      if (name == "ns") self->capture = &self->ns, self->has_ns = true;
      if (name == "redirect") self->redirect = true;
    } else if (name == "text" && parent == "revision" && self->up(2) == "page") {
      self->text.clear();  // a later revision replaces an earlier one
      self->capture = &self->text;
    }
    self->path.push_back(name);
  }

  static void XMLCALL on_end(void* self_, const XML_Char* name_) {
    auto* self = static_cast<Parser*>(self_);
    // After XML_StopParser in on_start, expat still ends an empty element (`<rss/>`) that was
    // never pushed.
    if (self->path.empty() || !self->error.is_ok()) return;
    self->path.pop_back();
    self->capture = nullptr;  // the wanted elements hold no elements
    if (std::string_view(name_) != "page" || self->up(1) != "mediawiki") return;
    const bool article = !self->has_ns || self->ns == "0";
    if (article && !self->redirect && !self->text.empty()) {
      self->page.wikitext.swap(self->text);
      self->ready->push_back(std::move(self->page));
    }
  }

  static void XMLCALL on_text(void* self_, const XML_Char* s, int len) {
    auto* self = static_cast<Parser*>(self_);
    if (self->capture) self->capture->append(s, size_t(len));
  }
};

MediaWikiPages::MediaWikiPages(TextSource* source, std::string name)
    : source_(source),
      name_(std::move(name)),
      buf_(kBlock, '\0'),
      parser_(std::make_unique<Parser>()) {
  parser_->ready = &ready_;
}

MediaWikiPages::~MediaWikiPages() = default;

Status MediaWikiPages::feed() {
  if (!parser_->xml) return Status::io_error(name_ + ": out of memory for expat");
  std::string why;
  bool damaged = false;
  const int64_t n = source_->read(buf_.data(), buf_.size(), &why, &damaged);
  if (n < 0) {
    const std::string m =
        fmt::format("{}: cannot read after XML line {} (byte offset {} of the file): {}", name_,
                    XML_GetCurrentLineNumber(parser_->xml), source_->offset(), why);
    return damaged ? Status::corrupt(m) : Status::io_error(m);
  }
  done_ = n == 0;
  if (XML_Parse(parser_->xml, buf_.data(), int(n), done_) == XML_STATUS_OK) return Status::ok();
  if (!parser_->error.is_ok())
    return Status::corrupt(fmt::format("{}:{}:{}: {}", name_, parser_->error_line,
                                       parser_->error_column, parser_->error.message()));
  return Status::corrupt(fmt::format("{}:{}:{}: not well-formed XML: {}", name_,
                                     XML_GetCurrentLineNumber(parser_->xml),
                                     XML_GetCurrentColumnNumber(parser_->xml) + 1,
                                     XML_ErrorString(XML_GetErrorCode(parser_->xml))));
}

Status MediaWikiPages::next(MediaWikiPage* page, bool* got) {
  while (ready_.empty() && !done_) LB_RETURN_IF_ERROR(feed());
  *got = !ready_.empty();
  if (*got) {
    *page = std::move(ready_.front());
    ready_.pop_front();
  }
  return Status::ok();
}

}  // namespace lansbert
