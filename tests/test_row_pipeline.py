"""Pipeline layout and MTP depth read from a row's notes (validate/row_pipeline.py, issue 16)."""

from __future__ import annotations

from perfcast.validate.row_pipeline import stated_mtp_layers, stated_pipeline_layout

NOTES = ("Cumulative optimization step \"Baseline\" (dispatcher AlltoAll); same parallel layout "
         "TP1/PP8/VPP4/EP32/MBS1/GBS2048, PP layout Et|(tt|)*30L, MTP 1 layer. grad_accum = 64.")


def test_layout_with_one_segment_per_chunk_is_read():
    notes: list[str] = []
    assert stated_pipeline_layout({"notes": NOTES}, 32, notes) == {
        "pipeline_layout": "Et|(tt|)*30L"}
    assert notes and "Et|(tt|)*30L" in notes[0]


def test_layout_with_the_wrong_number_of_segments_is_not_used_and_says_why():
    notes: list[str] = []
    assert stated_pipeline_layout({"notes": NOTES}, 16, notes) == {}
    assert "32 segments for pp*vpp=16" in notes[0]


def test_no_layout_stated_means_nothing_assumed():
    notes: list[str] = []
    assert stated_pipeline_layout({"notes": "PP8 VPP4"}, 32, notes) == {}
    assert stated_mtp_layers({"notes": "no multi-token prediction"}, 1, notes) == {}
    assert notes == []


def test_mtp_depth_read_when_the_model_has_it():
    notes: list[str] = []
    assert stated_mtp_layers({"notes": NOTES}, 1, notes) == {"mtp_num_layers": 1}
    assert stated_mtp_layers({"notes": "EP 64 spans 8 nodes; MTP depth 1;"}, 1, []) == {
        "mtp_num_layers": 1}
    assert stated_mtp_layers({"notes": NOTES}, 0, notes) == {}
    assert "model has 0 MTP" in notes[-1]
