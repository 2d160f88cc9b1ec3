-- Events that outlive the handoff (issue 16). uid is the event's stable id
-- ("evt_…", what webhook deliveries carry); recipient is the address an
-- event is about ('' for the whole send); bounce is the JSON of a
-- core.Bounce ('' for none).
ALTER TABLE send_events ADD COLUMN uid TEXT NOT NULL DEFAULT '';
ALTER TABLE send_events ADD COLUMN recipient TEXT NOT NULL DEFAULT '';
ALTER TABLE send_events ADD COLUMN bounce TEXT NOT NULL DEFAULT '';
