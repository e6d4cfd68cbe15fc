// A benchmark helper that a program must not include.
#pragma once
