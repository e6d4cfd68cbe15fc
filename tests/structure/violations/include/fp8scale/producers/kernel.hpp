// The producer header the reference above includes (no violation of its own).
#pragma once
