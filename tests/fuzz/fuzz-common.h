/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What every libFuzzer harness shares. A parser's
 * own contract is checked with g_assert_*: a broken invariant aborts, and
 * libFuzzer keeps the input as a crash. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <glib.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* A g_return_if_fail() or a g_warning() in the code under test is a bug
 * the fuzzer found, not noise: abort (SIGABRT, which libFuzzer catches and
 * keeps the input for; GLib's own fatal path raises SIGTRAP, which it does
 * not). */
static inline GLogWriterOutput
fuzz_log_writer (GLogLevelFlags level, const GLogField *fields, gsize n_fields, gpointer user_data)
{
  if (level & (G_LOG_LEVEL_DEBUG | G_LOG_LEVEL_INFO))
    return G_LOG_WRITER_HANDLED;   /* millions of runs: no chatter */
  g_log_writer_standard_streams (level, fields, n_fields, user_data);
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    abort ();
  return G_LOG_WRITER_HANDLED;
}

static inline void
fuzz_setup (void)
{
  g_log_set_writer_func (fuzz_log_writer, NULL, NULL);
}

/* A NUL-terminated copy of the input, for the parsers that take a string. */
static inline gchar *
fuzz_string (const uint8_t *data, size_t size)
{
  return g_strndup ((const gchar *) data, size);
}
