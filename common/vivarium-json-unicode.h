/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* json-glib decodes a \u escape of a UTF-16 surrogate that is not half of a
 * pair ("\ud800", "\udc00") to the bytes of the surrogate itself, which are
 * not UTF-8: valid text in, strings that are not UTF-8 out (and written out
 * again as such by its generator). Every reader of JSON it did not write
 * itself checks the escapes with this before the parser sees the text.
 * TRUE when every \u escape of @text is four hex digits (json-glib reads
 * other bytes as digits too) of a character or of a whole pair. */
gboolean vivarium_json_escapes_valid (const gchar *text,
                                      gsize        len);

G_END_DECLS
