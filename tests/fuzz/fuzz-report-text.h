/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "vivarium-report.h"

/* A rendered report read back by its grammar (fuzz-report-text.c). */
typedef struct {
  GPtrArray *keys;      /* of const gchar *: the trusted lines' keys, in order */
  GPtrArray *details;   /* of gchar *: "label\x01value[\x01value...]", unescaped */
  gchar     *claim;     /* the quote lines after the claim's key, joined; NULL: none */
  gchar     *question;  /* likewise after the question's key */
} FuzzReportText;

void fuzz_report_text_parse (const gchar *text, FuzzReportText *parsed);
void fuzz_report_text_clear (FuzzReportText *parsed);
/* Renders @report and asserts the text gives back exactly its untrusted
 * strings, each where the grammar puts it; @parsed gets the reading. */
void fuzz_report_text_check (VivariumReport *report, const gchar *fingerprint, FuzzReportText *parsed);
