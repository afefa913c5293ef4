// Status and Result<T> are part of the public API (include/inflight/status.h).
#pragma once
#include "inflight/status.h"
