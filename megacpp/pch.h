// Precompiled header: the libtorch headers almost every translation unit needs.
#pragma once
#include <torch/torch.h>
