// Recipes: ready config files in the source tree's recipes/ folder (fmnist_fast.json, ...),
// run with `ringlet train --recipe NAME`. A recipe is an ordinary config file whose header
// comment gives the command, the expected accuracy and time, and how they were measured; the
// first comment line is its one-line summary in `ringlet train --help`. The folder is the one
// compiled in (<source root>/recipes) unless RINGLET_RECIPES_DIR names another.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ringlet::trainer {

struct Recipe {
  std::string name;  // the file name without .json
  std::filesystem::path path;
  std::string summary;  // the first line of its header comment, "" when it has none
};

// RINGLET_RECIPES_DIR when set and not empty, else the source tree's recipes/ folder.
std::filesystem::path recipes_dir();

// The *.json files of recipes_dir(), by name; empty when the folder does not exist.
std::vector<Recipe> list_recipes();

// The file `--recipe` names: a path as it is when it contains a '/' or ends in .json, else
// recipes_dir()/NAME.json. An unknown name is a UsageError naming the nearest recipe,
// every available one and the folder looked in.
std::filesystem::path find_recipe(const std::string& name_or_path);

}  // namespace ringlet::trainer
