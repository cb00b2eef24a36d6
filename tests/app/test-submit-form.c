/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The New Task and Start Session dialogs' checks (app/vivarium-submit-form.c):
 * each refusal the daemon would make for the form is said before the call,
 * in a sentence, and a ready form becomes exactly the options the contract
 * names. */
#include "config.h"

#include <string.h>

#include "vivarium-submit-form.h"

static GBytes *
script_bytes (gsize n)
{
  return g_bytes_new_take (g_malloc0 (n), n);
}

static VivariumTaskForm
agent_form (void)
{
  VivariumTaskForm form = {
    .project = "demo", .image = "tiny", .worker = VIVARIUM_SUBMIT_WORKER_AGENT,
    .instructions = "Add a README.", .verify = "", .timeout = "", .egress = "", .groups = "",
  };

  return form;
}

/* check FORM: the reason, which must contain @expected (NULL: ready). */
static void
assert_task_reason (const VivariumTaskForm *form, const char *expected)
{
  g_autofree char *why = vivarium_task_form_check (form);

  if (expected == NULL) {
    g_assert_null (why);
    return;
  }
  g_assert_nonnull (why);
  if (strstr (why, expected) == NULL)
    g_error ("reason “%s” does not say “%s”", why, expected);
}

static void
test_task_form_refusals (void)
{
  VivariumTaskForm form = agent_form ();
  g_autoptr(GBytes) empty = script_bytes (0);
  g_autoptr(GBytes) at_cap = script_bytes (1024 * 1024);
  g_autoptr(GBytes) over_cap = script_bytes (1024 * 1024 + 1);
  g_autofree char *long_text = g_strnfill (64 * 1024 + 1, 'a');
  g_autofree char *cap_text = g_strnfill (64 * 1024, 'a');
  g_autofree char *long_verify = g_strnfill (4097, 't');

  assert_task_reason (&form, NULL);
  form.project = "";
  assert_task_reason (&form, "Choose a project");
  form.project = "Demo";
  assert_task_reason (&form, "not a project name");
  form = agent_form ();
  form.image = NULL;
  assert_task_reason (&form, "frozen image");

  /* The agent needs instructions; the cap is the contract's 64 KiB. */
  form = agent_form ();
  form.instructions = " \n\t ";
  assert_task_reason (&form, "Write the instructions");
  form.instructions = long_text;
  assert_task_reason (&form, "65537 bytes long");
  form.instructions = cap_text;
  assert_task_reason (&form, NULL);
  form.instructions = "bad \xff utf-8";
  assert_task_reason (&form, "UTF-8");

  /* A script worker needs a readable, non-empty script of at most 1 MiB;
   * its instructions may be empty. */
  form = agent_form ();
  form.worker = VIVARIUM_SUBMIT_WORKER_SCRIPT;
  form.instructions = "";
  assert_task_reason (&form, "Choose the script file");
  form.script_error = "Cannot read the script: No such file or directory";
  assert_task_reason (&form, "No such file");
  form.script_error = NULL;
  form.script = empty;
  assert_task_reason (&form, "empty");
  form.script = over_cap;
  assert_task_reason (&form, "larger than 1 MiB");
  form.script = at_cap;
  assert_task_reason (&form, NULL);

  form = agent_form ();
  form.verify = long_verify;
  assert_task_reason (&form, "longer than 4096 bytes");
  form.verify = "   ";
  assert_task_reason (&form, "only spaces");
  for (guint i = 0; i < 6; i++) {
    const char *bad[] = { "0", "-1", "abc", "1.5", "604801", "18446744073709551617" };
    form = agent_form ();
    form.timeout = bad[i];
    assert_task_reason (&form, "whole number of seconds");
  }
  form.timeout = "604800";
  assert_task_reason (&form, NULL);

  form = agent_form ();
  form.egress = "open";
  form.groups = "debian";
  assert_task_reason (&form, "only to the allowlist");
  form.egress = "none";
  assert_task_reason (&form, "only to the allowlist");
  form.egress = "";
  assert_task_reason (&form, NULL);
  form.egress = "allowlist";
  form.groups = "debian, ba/d";
  assert_task_reason (&form, "“ba/d” is not a rule group name");
  form.groups = " debian , , pypi ";
  assert_task_reason (&form, NULL);
  form.egress = "sometimes";
  form.groups = "";
  assert_task_reason (&form, "Unknown egress mode");

  /* Secrets and SSH keys: the store's names, a few, once each, allowlist only. */
  form = agent_form ();
  form.secrets = "GITHUB_TOKEN, npm_token";
  form.ssh_keys = "deploy";
  assert_task_reason (&form, NULL);
  form.egress = "open";
  assert_task_reason (&form, "Secrets apply only to the allowlist");
  form.secrets = "";
  assert_task_reason (&form, "SSH keys apply only to the allowlist");
  form.egress = "allowlist";
  form.ssh_keys = "deploy-key";
  assert_task_reason (&form, "“deploy-key” is not a name of the store");
  form.ssh_keys = "a,b,c,d,e,f,g,h,i";
  assert_task_reason (&form, "SSH keys: at most 8");
  form.ssh_keys = "";
  form.secrets = "A, B, A";
  assert_task_reason (&form, "“A” is named twice");
  form.secrets = "9lives";
  assert_task_reason (&form, "“9lives” is not a name of the store");
}

static void
test_task_form_options (void)
{
  VivariumTaskForm form = agent_form ();
  g_autoptr(GBytes) script = g_bytes_new_static ("#!/bin/sh\n\001\377", 12);
  g_autoptr(GVariant) agent = NULL;
  g_autoptr(GVariant) with_script = NULL;
  g_autofree char *printed = NULL;
  const char *worker = NULL;
  g_autoptr(GVariant) bytes = NULL;
  g_auto(GStrv) groups = NULL;
  guint32 timeout = 0;

  /* Only what was given: the daemon owns the defaults. */
  agent = g_variant_ref_sink (vivarium_task_form_options (&form));
  printed = g_variant_print (agent, TRUE);
  g_assert_cmpstr (printed, ==, "{'worker': <'agent'>}");

  form.worker = VIVARIUM_SUBMIT_WORKER_SCRIPT;
  form.script = script;
  form.verify = "grep -qx blue colour.txt";
  form.timeout = "600";
  form.egress = "allowlist";
  form.groups = "debian, pypi";
  form.secrets = " GITHUB_TOKEN ,";
  form.ssh_keys = "deploy";
  with_script = g_variant_ref_sink (vivarium_task_form_options (&form));
  g_assert_true (g_variant_lookup (with_script, "worker", "&s", &worker));
  g_assert_cmpstr (worker, ==, "script");
  bytes = g_variant_lookup_value (with_script, "script", G_VARIANT_TYPE_BYTESTRING);
  g_assert_nonnull (bytes);
  g_assert_cmpmem (g_variant_get_data (bytes), g_variant_get_size (bytes), "#!/bin/sh\n\001\377", 12);
  g_assert_true (g_variant_lookup (with_script, "timeout", "u", &timeout));
  g_assert_cmpuint (timeout, ==, 600);
  g_assert_true (g_variant_lookup (with_script, "egress_groups", "^as", &groups));
  g_assert_cmpstrv (groups, ((const char *[]) { "debian", "pypi", NULL }));
  g_assert_true (g_variant_lookup (with_script, "verify", "&s", &worker));
  g_assert_cmpstr (worker, ==, "grep -qx blue colour.txt");
  g_clear_pointer (&groups, g_strfreev);
  g_assert_true (g_variant_lookup (with_script, "secrets", "^as", &groups));
  g_assert_cmpstrv (groups, ((const char *[]) { "GITHUB_TOKEN", NULL }));
  g_clear_pointer (&groups, g_strfreev);
  g_assert_true (g_variant_lookup (with_script, "ssh_keys", "^as", &groups));
  g_assert_cmpstrv (groups, ((const char *[]) { "deploy", NULL }));
  g_assert_cmpuint (g_variant_n_children (with_script), ==, 8);
}

static void
test_session_form (void)
{
  VivariumSessionForm form = { .image = "tiny", .memory = "", .cpus = "", .timeout = "", .egress = "",
                               .groups = "" };
  g_autoptr(GVariant) options = NULL;
  g_autofree char *printed = NULL;
  g_autofree char *why = NULL;

  g_assert_null (vivarium_session_form_check (&form));
  form.memory = "127";
  why = vivarium_session_form_check (&form);
  g_assert_nonnull (strstr (why, "Memory must be a whole number of MiB, 128 to 65536"));
  g_clear_pointer (&why, g_free);
  form.memory = "1024";
  form.cpus = "65";
  why = vivarium_session_form_check (&form);
  g_assert_nonnull (strstr (why, "CPUs"));
  g_clear_pointer (&why, g_free);
  form.cpus = "2";
  form.timeout = "x";
  why = vivarium_session_form_check (&form);
  g_assert_nonnull (strstr (why, "0 to 604800"));
  g_clear_pointer (&why, g_free);
  form.timeout = "0";   /* the contract's "no limit" */
  form.egress = "open";
  form.groups = "debian";
  why = vivarium_session_form_check (&form);
  g_assert_nonnull (strstr (why, "only to the allowlist"));
  g_clear_pointer (&why, g_free);
  form.groups = "";
  form.secrets = "GITHUB_TOKEN";
  why = vivarium_session_form_check (&form);
  g_assert_nonnull (strstr (why, "Secrets apply only to the allowlist"));
  g_clear_pointer (&why, g_free);
  form.secrets = "";
  g_assert_null (vivarium_session_form_check (&form));
  form.image = "";
  why = vivarium_session_form_check (&form);
  g_assert_nonnull (strstr (why, "frozen image"));
  form.image = "tiny";
  options = g_variant_ref_sink (vivarium_session_form_options (&form));
  printed = g_variant_print (options, TRUE);
  g_assert_cmpstr (printed, ==, "{'memory': <uint32 1024>, 'cpus': <uint32 2>, 'timeout': <uint32 0>, 'egress': <'open'>}");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/app/submit-form/task/refusals", test_task_form_refusals);
  g_test_add_func ("/app/submit-form/task/options", test_task_form_options);
  g_test_add_func ("/app/submit-form/session", test_session_form);
  return g_test_run ();
}
