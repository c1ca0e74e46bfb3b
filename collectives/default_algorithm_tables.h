// The all-reduce algorithm by size that `auto` takes on host buffers when no table is named
// (RINGLET_ALGO_TABLE, CommOptions::algo_table): the model's choice (model/, `ringlet model
// table`) under its default profile, round figures of a 2-core VM's fit, for 2-8 ranks on one
// host. tests/model/test_default_tables checks that they are what the model says today.
#pragma once

#include "collectives/algorithm_table.h"

namespace ringlet::collectives {

const AlgorithmTables& default_algorithm_tables();
// `world_size`'s default table; empty where there is none (then the thresholds decide).
AlgorithmTable default_algorithm_table(int world_size);

}  // namespace ringlet::collectives
