"""Quiet when unsure: the language server holds back an automatic answer whose calibrated confidence is
below min_confidence (the model's recommended threshold at the cursor's place unless the user sets one),
shows it when asked,
and says in its timings what it held back and how sure it was."""

from lsprotocol import types

from tests.lsp_session import Session, run

URI = "file:///tmp/celeris-confidence-test.py"
TEXT = "import os\n\n\ndef list_dir(path):\n    return os.\n"


def test_unsure_automatic_answers_are_held_back_and_invoked_ones_shown(shipped_model_dir):
    async def scenario():
        base = {"mode": "line", "budget_ms": 60000}
        s = Session(shipped_model_dir, init_options={**base, "min_confidence": 0.999})  # nothing is that sure
        await s.start()
        status = await s.status()
        assert status.calibrated and status.min_confidence_in_force == 0.999
        assert {"typescript", "go", "rust", "java", "c"} <= set(status.grammars)  # parsers judge their answers
        s.open(URI, TEXT)
        automatic = await s.inline(URI, 4, 14)
        note = s.timings[-1]
        assert not automatic.items and note.shown is False and note.hidden
        assert 0.0 <= note.confidence < 0.999 and note.features.steps_run >= 1
        # The completion menu opened by a trigger character (a keystroke) stays quiet too.
        menu = await s.completion(URI, 4, 14, trigger=types.CompletionTriggerKind.TriggerCharacter)
        assert not menu.items and s.timings[-1].hidden
        invoked = await s.inline(URI, 4, 14, invoked=True)
        assert invoked.items and invoked.items[0].insert_text.endswith(note.hidden)  # the user asked: shown
        assert (await s.completion(URI, 4, 14, trigger=types.CompletionTriggerKind.Invoked)).items
        other = URI.replace(".py", "-2.py")  # (a document of its own: no answer kept from the requests above)
        s.open(other, TEXT)
        asked = (await s.completion(other, 4, 14, trigger=types.CompletionTriggerKind.Invoked)).items
        assert asked and asked[0].data["confidence"] == s.timings[-1].confidence  # the menu item says how sure
        assert asked[0].label_details.description == f"{s.timings[-1].confidence:.0%}"
        assert (await s.completion(URI, 4, 14)).items  # a client that does not say: asked for
        await s.stop()
        s = Session(shipped_model_dir, init_options={**base, "min_confidence": 0.0})  # everything shown
        await s.start()
        s.open(URI, TEXT)
        shown = await s.inline(URI, 4, 14)
        assert shown.items and s.timings[-1].shown is True and s.timings[-1].hidden is None
        assert s.timings[-1].confidence == note.confidence  # the same answer, the same confidence
        await s.stop()
        s = Session(shipped_model_dir, init_options=base)  # the model's recommendation
        await s.start()
        status = await s.status()
        in_force = status.min_confidence_in_force._asdict()  # one per place of the cursor
        assert sorted(in_force) == ["blank", "indent", "mid"] and all(0.0 < t < 0.999 for t in in_force.values())
        assert status.settings.min_confidence == 0.0
        s.open(URI, TEXT)
        await s.inline(URI, 4, 14)  # mid-line: that place's threshold decides
        note = s.timings[-1]
        assert note.min_confidence == in_force["mid"] and note.shown == (note.confidence >= in_force["mid"])
        await s.stop()

    run(scenario())
