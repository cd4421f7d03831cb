-- Transcripts (activities.TranscriptStore). One row per session: its
-- message count and working-state snapshot. One row per message: numbered
-- 1, 2, ... (pos) in the order appended, under the session row's lock, so
-- the rows of a session commit in pos order and a reader that holds the
-- first n fetches the rest with pos > n. A deleted and re-created session
-- gets a new id, which tells a cached tree it is stale.
CREATE TABLE transcript_sessions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant     text        NOT NULL,
    session_id text        NOT NULL,
    messages   bigint      NOT NULL DEFAULT 0,
    snapshot   bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant, session_id)
);

CREATE TABLE transcript_messages (
    session   bigint NOT NULL REFERENCES transcript_sessions (id) ON DELETE CASCADE,
    pos       bigint NOT NULL,
    id        text   NOT NULL,
    parent_id text,
    role      text   NOT NULL,
    -- The message as one JSONL entry (convo.MarshalEntry), as in the file
    -- store and the export: text, because jsonb refuses \u0000.
    entry     text   NOT NULL,
    PRIMARY KEY (session, id),
    UNIQUE (session, pos)
);
