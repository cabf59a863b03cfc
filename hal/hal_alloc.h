/*
 * The allocation registry of a GPU backend module (hal/cuda, hal/hip): every allocation the
 * module made or mapped, and the application's own device memory once mem_info or mem_export met
 * it ("foreign"), in one list under one lock, found by any address inside it. A module's entry
 * type starts with a hal_alloc_t (member `r`) and adds what its driver needs.
 *
 * Foreign memory is described by the driver again at each meeting: an entry whose allocation was
 * freed and made anew at the same address (another buffer id, base or size) is dropped and
 * replaced, so mem_info's id tells a freed-and-reused range apart (hal.h, hal_mem_info_t).
 * Header-only: each module compiles its own copy (the library has none).
 */
#ifndef MSCCLPP_HAL_ALLOC_H
#define MSCCLPP_HAL_ALLOC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hal/hal.h"

/* Foreign ids are the driver's buffer ids with this bit; ours count up from 1 without it. */
#define HAL_ALLOC_FOREIGN_ID (1ull << 63)

typedef struct hal_alloc {
    struct hal_alloc *next;
    int kind; /* the module's kind enum */
    void *base;
    size_t size;
    uint64_t id; /* mem_info's id */
} hal_alloc_t;

typedef struct {
    pthread_mutex_t lock;
    hal_alloc_t *head;
    uint64_t next_id;  /* ids of the module's own allocations (under lock) */
    int foreign_kind;  /* the kind foreign entries carry */
    size_t entry_size; /* sizeof the module's entry type */
} hal_alloc_reg_t;

#define HAL_ALLOC_REG_INIT(entry_type, foreign)                           \
    {                                                                     \
        PTHREAD_MUTEX_INITIALIZER, NULL, 1, (foreign), sizeof(entry_type) \
    }

/* The driver's description of the foreign allocation containing ptr, written into `fresh` (an
 * entry of the module's type, zeroed): base, size, id (with HAL_ALLOC_FOREIGN_ID) and the
 * module's own fields. False when the driver cannot describe it (host or managed memory, an old
 * driver). `listed` is the foreign entry the registry holds at ptr (NULL: none), read only: a
 * module whose driver tells an allocation by its id alone (ids never reused) may copy what the
 * id's entry already says instead of asking the driver again; hal_alloc_current keeps `listed`
 * when fresh's id, base and size are its own. Called with the lock held; must not call back
 * into the registry. */
typedef bool (*hal_alloc_describe_fn)(const void *ptr, const hal_alloc_t *listed,
                                      hal_alloc_t *fresh);
/* Free a foreign entry already taken out of the list (its memory is the application's). */
typedef void (*hal_alloc_release_fn)(hal_alloc_t *stale);
/* Whether peers can map the allocation of this entry. */
typedef bool (*hal_alloc_shareable_fn)(const hal_alloc_t *a);

/** The entry containing [ptr, ptr + 1), or NULL. Lock held. */
static inline hal_alloc_t *hal_alloc_find(hal_alloc_reg_t *reg, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    for (hal_alloc_t *a = reg->head; a; a = a->next)
        if (p >= (uintptr_t)a->base && p - (uintptr_t)a->base < a->size) return a;
    return NULL;
}

/** Put `a` (kind, base, size and the module's fields set) on the list with the next id. Takes
 *  the lock. */
static inline void hal_alloc_add(hal_alloc_reg_t *reg, hal_alloc_t *a)
{
    pthread_mutex_lock(&reg->lock);
    a->id = reg->next_id++;
    a->next = reg->head;
    reg->head = a;
    pthread_mutex_unlock(&reg->lock);
}

/** Take `a` off the list (lock held). */
static inline void hal_alloc_unlink(hal_alloc_reg_t *reg, hal_alloc_t *a)
{
    for (hal_alloc_t **pp = &reg->head; *pp; pp = &(*pp)->next)
        if (*pp == a) {
            *pp = a->next;
            return;
        }
}

/** Take off the list and return the entry whose base is `base` and whose kind is in the bit mask
 *  `kinds` (1u << kind); NULL if none. Takes the lock. */
static inline hal_alloc_t *hal_alloc_take(hal_alloc_reg_t *reg, const void *base, unsigned kinds)
{
    pthread_mutex_lock(&reg->lock);
    for (hal_alloc_t **pp = &reg->head; *pp; pp = &(*pp)->next) {
        hal_alloc_t *a = *pp;
        if (a->base == base && (kinds & (1u << a->kind))) {
            *pp = a->next;
            pthread_mutex_unlock(&reg->lock);
            return a;
        }
    }
    pthread_mutex_unlock(&reg->lock);
    return NULL;
}

/**
 * The entry of the allocation containing ptr, valid now: the module's own, or the foreign one
 * the driver describes (made, or made anew when the one listed was freed and replaced; the stale
 * one goes to `release`). NULL, with no error, when the driver cannot describe the memory or
 * host memory runs out. Lock held. `scratch` is an entry of the module's type to describe into.
 */
static inline hal_alloc_t *hal_alloc_current(hal_alloc_reg_t *reg, const void *ptr,
                                             hal_alloc_t *scratch, hal_alloc_describe_fn describe,
                                             hal_alloc_release_fn release)
{
    hal_alloc_t *a = hal_alloc_find(reg, ptr);
    if (a && a->kind != reg->foreign_kind) return a;
    memset(scratch, 0, reg->entry_size);
    if (!describe(ptr, a, scratch)) return NULL;
    if (a && a->id == scratch->id && a->base == scratch->base && a->size == scratch->size) return a;
    if (a) { /* freed by the application, and something else lives there now */
        hal_alloc_unlink(reg, a);
        release(a);
    }
    a = malloc(reg->entry_size);
    if (!a) return NULL;
    memcpy(a, scratch, reg->entry_size);
    a->kind = reg->foreign_kind;
    a->next = reg->head;
    reg->head = a;
    return a;
}

/** The HAL's mem_info slot over the registry (see hal_alloc_current). Takes the lock. */
static inline void hal_alloc_info(hal_alloc_reg_t *reg, const void *ptr, hal_alloc_t *scratch,
                                  hal_alloc_describe_fn describe, hal_alloc_release_fn release,
                                  hal_alloc_shareable_fn shareable, hal_mem_info_t *info)
{
    memset(info, 0, sizeof *info);
    pthread_mutex_lock(&reg->lock);
    hal_alloc_t *a = hal_alloc_current(reg, ptr, scratch, describe, release);
    if (a) {
        info->base = a->base;
        info->size = a->size;
        info->id = a->id;
        info->foreign = a->kind == reg->foreign_kind;
        info->shareable = shareable(a);
    }
    pthread_mutex_unlock(&reg->lock);
}

#endif
