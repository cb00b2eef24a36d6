/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* What the New Task and Start Session dialogs hold, as typed: plain data,
 * so that their checks are the unit tests' too (tests/app/). Every check is
 * the daemon's own rule, from common/, so that the Submit button is offered
 * only for a request the daemon will not refuse for its form. */

typedef enum {
  VIVARIUM_SUBMIT_WORKER_AGENT,
  VIVARIUM_SUBMIT_WORKER_SCRIPT,
} VivariumSubmitWorker;

typedef struct {
  const char           *project;       /* "" while none is chosen */
  const char           *image;         /* a frozen image's name, "" while none */
  VivariumSubmitWorker  worker;
  const char           *instructions;  /* may be NULL: "" */
  GBytes               *script;        /* the chosen script's bytes, NULL while none */
  const char           *script_error;  /* why the chosen file could not be read, or NULL */
  const char           *verify;        /* "" for none: the verdict is the worker's own */
  const char           *timeout;       /* seconds as typed; "" for the daemon's */
  const char           *egress;        /* "" (the daemon's), "none", "allowlist", "open" */
  const char           *groups;        /* comma list of rule groups, "" for the defaults */
  const char           *secrets;       /* comma list of stored secrets' names, "" for the project's */
  const char           *ssh_keys;      /* comma list of stored SSH keys' names, "" for the project's */
} VivariumTaskForm;

typedef struct {
  const char *image;
  const char *memory;                  /* MiB as typed; "" for the daemon's */
  const char *cpus;
  const char *timeout;                 /* seconds; "" or "0" for none */
  const char *egress;
  const char *groups;
  const char *secrets;
  const char *ssh_keys;
} VivariumSessionForm;

char     *vivarium_task_form_check       (const VivariumTaskForm    *form);
GVariant *vivarium_task_form_options     (const VivariumTaskForm    *form);
char     *vivarium_session_form_check    (const VivariumSessionForm *form);
GVariant *vivarium_session_form_options  (const VivariumSessionForm *form);

/* "a, b,,c " → ["a", "b", "c"]; NULL when there is none. */
char    **vivarium_submit_split_groups   (const char                *text);

G_END_DECLS
