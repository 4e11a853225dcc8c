from tfscones.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID


def test_ids_are_the_design_ids():
    # Padding masks, the SCONES loss (w1 = </s>) and decoders rely on these exact values.
    assert (PAD_ID, EOS_ID, UNK_ID, BOS_ID) == (0, 1, 2, 3)
