/*
 * Near misses among names: how far a mistyped name is from each known one, for the errors that
 * suggest the name meant ("max_mesage_size: unknown key (did you mean max_message_size?)",
 * "MSCCLPP_DEBG is not a variable of libmscclpp (did you mean MSCCLPP_DEBUG?)").
 */
#ifndef MSCCLPP_BASE_NAMES_H
#define MSCCLPP_BASE_NAMES_H

#ifdef __cplusplus
extern "C" {
#endif

/** Edit distance of two names (insert, delete, substitute, swap of two neighbours), at most 3:
 * anything farther (or names over 63 characters) reads as 3. */
int names_distance(const char *a, const char *b);
/** The entry of the NULL-terminated `names` nearest to `s`, at most 2 edits away, or NULL. */
const char *names_nearest(const char *s, const char *const *names);

#ifdef __cplusplus
}
#endif

#endif
