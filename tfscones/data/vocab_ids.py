"""Fixed ids of the special tokens, shared by tokenizers, losses, models and decoders.

Ids: pad 0, eos 1 (the papers' w1 = </s>), unk 2, bos 3.
"""

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
BOS_ID = 3
