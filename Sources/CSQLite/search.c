#include "csqlite.h"
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

/* The most tokens a query holds (SearchQuery.maxWords words, with room for words the
   tokenizer splits), and the most words. */
#define MAX_TERMS 32
#define MAX_WORDS 16
/* BM25's constants, and the column length its length normalisation is relative to. */
#define BM25_K1 1.2
#define BM25_B 0.75
#define NOMINAL_LENGTH 12.0

typedef struct {
    fts5_tokenizer api;
    Fts5Tokenizer *tokenizer;
} Tokenizer;

typedef struct {
    char *text;
    int length;
    int prefix;
} Term;

/* A query: its words' tokens, in order. A word the tokenizer splits into several tokens
   (at a zero-width non-joiner, say, which Swift keeps inside a letter) is a phrase, as in
   the FTS5 query (`"w1 w2"*`): its tokens one after another in a column, only the last
   matching as a prefix. A query with more tokens or words than these functions keep
   (`overflow`: a word split 32 times) matches nothing, rather than more than FTS5 would. */
typedef struct {
    int count;
    Term terms[MAX_TERMS];
    int words;
    /* Each word's first token, and how many it has. */
    int first[MAX_WORDS];
    int length[MAX_WORDS];
    int overflow;
    /* The first bytes of its tokens, as a set (bit b of firsts[b / 8]): a token of a
       column that begins with another byte matches none of them. */
    unsigned char firsts[32];
} Query;

static void query_free(void *pointer) {
    Query *query = pointer;
    if (query == NULL) return;
    for (int i = 0; i < query->count; i++) sqlite3_free(query->terms[i].text);
    sqlite3_free(query);
}

typedef struct {
    Query *query;
    int prefix;
} QueryBuilder;

static int add_term(void *context, int flags, const char *token, int length, int start, int end) {
    (void)flags; (void)start; (void)end;
    QueryBuilder *builder = context;
    Query *query = builder->query;
    if (length <= 0) return SQLITE_OK;
    if (query->count == MAX_TERMS) {
        query->overflow = 1;
        return SQLITE_OK;
    }
    char *text = sqlite3_malloc(length);
    if (text == NULL) return SQLITE_NOMEM;
    memcpy(text, token, (size_t)length);
    query->terms[query->count++] = (Term){text, length, builder->prefix};
    return SQLITE_OK;
}

/* The query of argument 0, parsed once per statement: kept as the argument's auxiliary
   data, which SQLite may discard at any time, so a caller passes what this returns to
   query_keep once it is done with it. */
static Query *query_of(sqlite3_context *context, sqlite3_value *argument, Tokenizer *tokenizer) {
    Query *query = sqlite3_get_auxdata(context, 0);
    if (query != NULL) return query;
    query = sqlite3_malloc(sizeof(Query));
    if (query == NULL) return NULL;
    query->count = 0;
    query->words = 0;
    query->overflow = 0;
    memset(query->firsts, 0, sizeof query->firsts);
    const char *text = (const char *)sqlite3_value_text(argument);
    int length = sqlite3_value_bytes(argument);
    int start = 0;
    while (text != NULL && start < length) {
        int end = start;
        while (end < length && text[end] != ' ') end++;
        int wordEnd = end;
        int prefix = wordEnd > start && text[wordEnd - 1] == '*';
        if (prefix) wordEnd--;
        if (wordEnd > start) {
            QueryBuilder builder = {query, prefix};
            int before = query->count;
            int rc = tokenizer->api.xTokenize(tokenizer->tokenizer, &builder, FTS5_TOKENIZE_QUERY, text + start, wordEnd - start, add_term);
            if (rc != SQLITE_OK) {
                query_free(query);
                return NULL;
            }
            if (query->count > before) {
                if (query->words == MAX_WORDS) {
                    query->overflow = 1;
                } else {
                    query->first[query->words] = before;
                    query->length[query->words++] = query->count - before;
                    /* Only a phrase's last token matches as a prefix. */
                    for (int i = before; i + 1 < query->count; i++) query->terms[i].prefix = 0;
                }
            }
        }
        start = end + 1;
    }
    for (int i = 0; i < query->count; i++) {
        unsigned char byte = (unsigned char)query->terms[i].text[0];
        query->firsts[byte / 8] |= (unsigned char)(1u << (byte % 8));
    }
    return query;
}

/* Keeps the query for the statement's next row (or frees it, as SQLite decides). */
static void query_keep(sqlite3_context *context, Query *query) {
    if (sqlite3_get_auxdata(context, 0) != query) sqlite3_set_auxdata(context, 0, query, query_free);
}

static int term_matches(const Term *term, const char *token, int length) {
    if (term->prefix ? length < term->length : length != term->length) return 0;
    return token[0] == term->text[0] && memcmp(term->text, token, (size_t)term->length) == 0;
}

/* Tracks each word's phrase through a column's tokens (shift-and: bit j of a word's
   state is set when its tokens 0…j end at the current token). */
typedef struct {
    unsigned state[MAX_WORDS];
} Phrases;

/* Takes the next token of a column; returns the words whose phrase it completes. */
static unsigned phrases_advance(Phrases *phrases, const Query *query, const char *token, int length) {
    unsigned char byte = (unsigned char)token[0];
    if ((query->firsts[byte / 8] & (1u << (byte % 8))) == 0) {
        /* Most of a column's tokens: no phrase goes on through this one. */
        for (int word = 0; word < query->words; word++) phrases->state[word] = 0;
        return 0;
    }
    unsigned completed = 0;
    for (int word = 0; word < query->words; word++) {
        unsigned matches = 0;
        for (int j = 0; j < query->length[word]; j++) {
            if (term_matches(&query->terms[query->first[word] + j], token, length)) matches |= 1u << j;
        }
        phrases->state[word] = ((phrases->state[word] << 1) | 1u) & matches;
        if (phrases->state[word] & (1u << (query->length[word] - 1))) completed |= 1u << word;
    }
    return completed;
}

typedef int (*TokenCallback)(void *, int, const char *, int, int, int);

/* Each byte as tokenize_ascii reads it: an ASCII letter or digit folded to lower case,
   0 for any other ASCII byte (which separates tokens), NON_ASCII for the rest. */
#define NON_ASCII 0xFF
static const unsigned char ascii_folded[256] = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f,
    0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f,
    0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

/* The longest token tokenize_ascii folds; text with a longer one goes to the tokenizer. */
#define MAX_ASCII_TOKEN 128

/* What tokenize_ascii answers when the text needs the tokenizer itself. */
#define NOT_ASCII (-1)

/* Tokenizes ASCII text as unicode61 does: its tokens in ASCII are the runs of letters and
   digits, folded to lower case. Answers NOT_ASCII, having perhaps passed some tokens to
   `callback`, at the first other byte (or a very long word). One table lookup a byte
   (ascii_folded): ranking reads every byte of a candidate's text. */
static int tokenize_ascii(void *context, const char *text, int length, TokenCallback callback) {
    const unsigned char *bytes = (const unsigned char *)text;
    char folded[MAX_ASCII_TOKEN];
    int i = 0;
    while (i < length) {
        unsigned char byte = 0;
        while (i < length && (byte = ascii_folded[bytes[i]]) == 0) i++;
        if (i == length) break;
        if (byte == NON_ASCII) return NOT_ASCII;
        int start = i;
        while (i < length && (byte = ascii_folded[bytes[i]]) != 0 && byte != NON_ASCII) {
            if (i - start == MAX_ASCII_TOKEN) return NOT_ASCII;
            folded[i - start] = (char)byte;
            i++;
        }
        if (i < length && byte == NON_ASCII) return NOT_ASCII;
        int rc = callback(context, 0, folded, i - start, start, i);
        if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
}

/* Matching: which words have been seen; tokenizing stops once all have. */
typedef struct {
    const Query *query;
    Phrases phrases;
    unsigned found;
    unsigned all;
} Matching;

static int match_token(void *context, int flags, const char *token, int length, int start, int end) {
    (void)flags; (void)start; (void)end;
    Matching *matching = context;
    matching->found |= phrases_advance(&matching->phrases, matching->query, token, length);
    return matching->found == matching->all ? SQLITE_DONE : SQLITE_OK;
}

static void catalog_match(sqlite3_context *context, int count, sqlite3_value **arguments) {
    Tokenizer *tokenizer = sqlite3_user_data(context);
    Query *query = query_of(context, arguments[0], tokenizer);
    if (query == NULL) {
        sqlite3_result_error_nomem(context);
        return;
    }
    /* A query without words matches nothing, as a search for it finds nothing. */
    Matching matching = {query, {{0}}, 0, (1u << query->words) - 1};
    int rc = SQLITE_OK;
    for (int column = 1; column < count && query->words > 0 && !query->overflow && matching.found != matching.all; column++) {
        const char *text = (const char *)sqlite3_value_text(arguments[column]);
        if (text == NULL) continue;
        int length = sqlite3_value_bytes(arguments[column]);
        unsigned found = matching.found;
        /* A phrase lies within one column. */
        matching.phrases = (Phrases){{0}};
        rc = tokenize_ascii(&matching, text, length, match_token);
        if (rc == NOT_ASCII) {
            matching.found = found;
            matching.phrases = (Phrases){{0}};
            rc = tokenizer->api.xTokenize(tokenizer->tokenizer, &matching, FTS5_TOKENIZE_DOCUMENT, text, length, match_token);
        }
        if (rc == SQLITE_DONE) rc = SQLITE_OK;
        if (rc != SQLITE_OK) break;
    }
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(context, rc);
    } else {
        sqlite3_result_int(context, query->words > 0 && !query->overflow && matching.found == matching.all);
    }
    query_keep(context, query);
}

/* Ranking: each word's frequency (its phrase's) in one column, and the column's length in tokens. */
typedef struct {
    const Query *query;
    Phrases phrases;
    int frequencies[MAX_WORDS];
    int tokens;
} Counting;

static int count_token(void *context, int flags, const char *token, int length, int start, int end) {
    (void)start; (void)end;
    Counting *counting = context;
    if ((flags & FTS5_TOKEN_COLOCATED) == 0) counting->tokens++;
    unsigned completed = phrases_advance(&counting->phrases, counting->query, token, length);
    for (int word = 0; completed != 0; word++, completed >>= 1) {
        if (completed & 1u) counting->frequencies[word]++;
    }
    return SQLITE_OK;
}

static void catalog_rank(sqlite3_context *context, int count, sqlite3_value **arguments) {
    Tokenizer *tokenizer = sqlite3_user_data(context);
    Query *query = query_of(context, arguments[0], tokenizer);
    if (query == NULL) {
        sqlite3_result_error_nomem(context);
        return;
    }
    double score = 0;
    unsigned found = 0;
    for (int column = 1; column + 1 < count; column += 2) {
        double weight = sqlite3_value_double(arguments[column]);
        const char *text = (const char *)sqlite3_value_text(arguments[column + 1]);
        if (text == NULL) continue;
        int length = sqlite3_value_bytes(arguments[column + 1]);
        Counting counting = {query, {{0}}, {0}, 0};
        int rc = tokenize_ascii(&counting, text, length, count_token);
        if (rc == NOT_ASCII) {
            counting = (Counting){query, {{0}}, {0}, 0};
            rc = tokenizer->api.xTokenize(tokenizer->tokenizer, &counting, FTS5_TOKENIZE_DOCUMENT, text, length, count_token);
        }
        if (rc != SQLITE_OK) {
            sqlite3_result_error_code(context, rc);
            query_keep(context, query);
            return;
        }
        double norm = BM25_K1 * (1 - BM25_B + BM25_B * counting.tokens / NOMINAL_LENGTH);
        for (int word = 0; word < query->words; word++) {
            double frequency = counting.frequencies[word];
            if (frequency > 0) found |= 1u << word;
            score += weight * frequency * (BM25_K1 + 1) / (frequency + norm);
        }
    }
    /* A row without every word does not match: no rank. */
    if (query->words > 0 && !query->overflow && found == (1u << query->words) - 1) {
        sqlite3_result_double(context, -score);
    } else {
        sqlite3_result_null(context);
    }
    query_keep(context, query);
}

static void tokenizer_free(void *pointer) {
    Tokenizer *tokenizer = pointer;
    if (tokenizer == NULL) return;
    if (tokenizer->tokenizer != NULL) tokenizer->api.xDelete(tokenizer->tokenizer);
    sqlite3_free(tokenizer);
}

/* FTS5's API of the connection, as its documentation shows. */
static fts5_api *fts5_of(sqlite3 *db) {
    fts5_api *api = NULL;
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &statement, NULL) == SQLITE_OK) {
        sqlite3_bind_pointer(statement, 1, (void *)&api, "fts5_api_ptr", NULL);
        sqlite3_step(statement);
    }
    sqlite3_finalize(statement);
    return api;
}

/* One tokenizer for one function: each function owns (and frees) its own. */
static Tokenizer *tokenizer_new(fts5_api *fts5) {
    Tokenizer *tokenizer = sqlite3_malloc(sizeof(Tokenizer));
    if (tokenizer == NULL) return NULL;
    void *userData = NULL;
    tokenizer->tokenizer = NULL;
    if (fts5->xFindTokenizer(fts5, "unicode61", &userData, &tokenizer->api) != SQLITE_OK) {
        sqlite3_free(tokenizer);
        return NULL;
    }
    const char *options[] = {"remove_diacritics", "2"};
    if (tokenizer->api.xCreate(userData, options, 2, &tokenizer->tokenizer) != SQLITE_OK) {
        sqlite3_free(tokenizer);
        return NULL;
    }
    return tokenizer;
}

int csqlite_register_search(void *connection) {
    sqlite3 *db = connection;
    fts5_api *fts5 = fts5_of(db);
    if (fts5 == NULL) return SQLITE_ERROR;
    Tokenizer *matching = tokenizer_new(fts5);
    if (matching == NULL) return SQLITE_NOMEM;
    int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
    int rc = sqlite3_create_function_v2(db, "catalog_match", -1, flags, matching, catalog_match, NULL, NULL, tokenizer_free);
    if (rc != SQLITE_OK) return rc;
    Tokenizer *ranking = tokenizer_new(fts5);
    if (ranking == NULL) return SQLITE_NOMEM;
    return sqlite3_create_function_v2(db, "catalog_rank", -1, flags, ranking, catalog_rank, NULL, NULL, tokenizer_free);
}
