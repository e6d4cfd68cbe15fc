// fp8scale: umbrella include.
#pragma once

#include "platform.hpp"
#include "status.hpp"
#include "numeric.hpp"
#include "fp8.hpp"
#include "scale_math.hpp"
#include "scale_view.hpp"
#include "layout_policy.hpp"
#include "detail/checks.hpp"
#include "producers/group_quant.hpp"
#include "producers/silu_clamp_quant.hpp"
#include "producers/rmsnorm_quant.hpp"
#include "reference/group_quant.hpp"
#include "reference/fused_quant.hpp"
