// MediaWikiPages: the articles of a MediaWiki XML export (Wikipedia's
// `enwiki-*-pages-articles*.xml.bz2` dumps, Special:Export), pulled one page at a time from a
// TextSource through expat, so a 100 GB dump streams in the memory of a few pages. Only
// articles are handed out: pages in namespace 0 that are not redirects (an export older than
// schema 0.5, 2010, has no <ns>: its pages all count). A page with several revisions (a
// history dump) gives its last. The wikitext comes as the editor wrote it, XML entities
// decoded; wikitext.h makes it prose.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "lansbert/core/status.h"

namespace lansbert {

class TextSource;

struct MediaWikiPage {
  std::string title, wikitext;
  int64_t line = 0;   // of the <page> tag in the XML
  uint64_t byte = 0;  // where the <page> tag starts in the XML text (after decompression)
};

class MediaWikiPages {
 public:
  // `source` is read, not owned; `name` names the file in errors.
  MediaWikiPages(TextSource* source, std::string name);
  ~MediaWikiPages();
  MediaWikiPages(const MediaWikiPages&) = delete;
  MediaWikiPages& operator=(const MediaWikiPages&) = delete;

  // The next article into *page; *got is false at the end. XML that is not well formed, or
  // whose root is not <mediawiki>, is corrupt naming the file, line and column; a stream
  // that cannot be read is what the source says (corrupt when damaged, else io_error).
  Status next(MediaWikiPage* page, bool* got);

 private:
  struct Parser;  // expat's state and callbacks
  Status feed();  // one more block of the source into the parser

  TextSource* source_;
  std::string name_, buf_;
  std::unique_ptr<Parser> parser_;
  std::deque<MediaWikiPage> ready_;
  bool done_ = false;
};

}  // namespace lansbert
