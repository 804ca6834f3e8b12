// c10d's newer header path (libtorch >= 1.13); see c10d/ProcessGroupMPI.hpp.
#pragma once

#include "c10d/ProcessGroupMPI.hpp"
