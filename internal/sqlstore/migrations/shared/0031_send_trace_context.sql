-- The W3C traceparent of the span that accepted a send (NULL when tracing
-- was off): the worker that makes its attempts, in this process or
-- another, starts their spans as its children, so that an attempt is in
-- the trace of the request that accepted it. Never shown by the API.
ALTER TABLE sends ADD COLUMN trace_parent TEXT;
