/* sublet views — a small streaming JSON writer (json_writer.c): the JSON
 * outputs of the analyst (sublet/views.h) and of the CLI are written with it. */
#ifndef SL_VIEWS_JSON_WRITER_H
#define SL_VIEWS_JSON_WRITER_H

#include <stdint.h>
#include <stdio.h>

/* Writes one JSON document to a FILE*, pretty-printed with two-space
 * indentation.  Keys and strings are escaped; bytes that are not valid UTF-8
 * become U+FFFD, so the output is always valid JSON. */
#define SL_JSON_MAX_DEPTH 32

typedef struct sl_json_writer {
    FILE *out;
    int depth;
    int count[SL_JSON_MAX_DEPTH]; /* values written at each open level */
    int after_key;             /* a key was just written: the value follows inline */
} sl_json_writer;

void sl_json_init(sl_json_writer *w, FILE *out);
void sl_json_object_begin(sl_json_writer *w);
void sl_json_object_end(sl_json_writer *w);
void sl_json_array_begin(sl_json_writer *w);
void sl_json_array_end(sl_json_writer *w);
void sl_json_key(sl_json_writer *w, const char *key);
void sl_json_string(sl_json_writer *w, const char *s);
void sl_json_u64(sl_json_writer *w, uint64_t v);
void sl_json_i64(sl_json_writer *w, int64_t v);
void sl_json_double(sl_json_writer *w, double v);
void sl_json_bool(sl_json_writer *w, int v);
void sl_json_null(sl_json_writer *w);
/* A value that is already JSON text (written as is). */
void sl_json_raw(sl_json_writer *w, const char *text);
/* Convenience: key + value. */
void sl_json_kv_u64(sl_json_writer *w, const char *key, uint64_t v);
void sl_json_kv_string(sl_json_writer *w, const char *key, const char *s);
void sl_json_kv_double(sl_json_writer *w, const char *key, double v);
void sl_json_kv_bool(sl_json_writer *w, const char *key, int v);
/* Finish the document: a newline after the top-level value (which the
 * caller has closed), then flush. */
void sl_json_finish(sl_json_writer *w);
/* Escape `s` as a JSON string literal (with quotes) into out. */
void sl_json_write_escaped(FILE *out, const char *s);

#endif
