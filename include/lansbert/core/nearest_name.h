// "Did you mean ...?" for a mistyped name (a config key, a command-line value): the known
// name with the smallest edit distance, if it is close enough to be a likely typo.
#pragma once

#include <string>
#include <vector>

namespace lansbert {

// Levenshtein distance (insertions, deletions, substitutions; each costs 1).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `name` when at most max(1, size/4) edits away (so "data.max6pred"
// finds "data.max_pred" but "2ata" does not find every short key); "" otherwise. Ties go to
// the earlier candidate.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace lansbert
