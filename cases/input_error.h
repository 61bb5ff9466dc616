// InputError moved to common/input_error.h (every layer throws it); this path stays for files not yet updated.
#pragma once
#include "common/input_error.h"
