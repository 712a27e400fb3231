/// Records as JSON lines (one object per line): export for sharing and backup, import that
/// merges into a DB, never overwrites, and recognizes records it already holds.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "db/record_db.h"

namespace tessera {

/// One line (no trailing newline) per record.
std::string record_to_json(const Record& r);
/// Throws tessera::Error naming the missing or invalid field.
Record record_from_json(const std::string& line);

/// Writes every record of the DB, oldest first; returns how many.
size_t export_jsonl(RecordDb& db, std::ostream& out);

struct ImportStats {
  size_t records = 0;     // in the file
  size_t added = 0;       // new to the DB
  size_t duplicates = 0;  // already there (or repeated within the file)
};

/// Reads the whole file first: a malformed line gives tessera::Error "FILE:LINE: why" and
/// nothing of the file is imported. Then appends all records in one transaction. Blank lines
/// are skipped.
ImportStats import_jsonl(RecordDb& db, const std::string& path);
/// Parses JSON lines from a stream (`name` is used in messages).
std::vector<Record> parse_jsonl(std::istream& in, const std::string& name);

}  // namespace tessera
