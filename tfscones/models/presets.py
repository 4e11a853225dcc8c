"""Architecture presets of `Seq2SeqTransformer`: every constructor argument but vocabulary and head.

| preset | layers | hidden | heads | MLP   | params, 32K vocab (untied / tied) | 8K vocab      |
|--------|--------|--------|-------|-------|-----------------------------------|---------------|
| base   | 6 + 6  | 512    | 8     | 2,048 | 93.3M / 60.6M                     | 56.4M / 48.2M |
| small  | 3 + 3  | 256    | 4     | 1,024 | 30.1M / 13.8M                     | 11.7M / 7.6M  |
| tiny   | 2 + 2  | 128    | 4     | 512   | 13.2M / 5.1M                      | 4.0M / 2.0M   |

Layers: encoder + decoder; all three use dropout 0.1. 32K is 32,000 vocabulary entries, 8K
8,000; "tied" is `tie_embeddings=True`.

`base` is Table 1 of the SCONES paper (Stahlberg & Kumar 2022): 6 layers, attention and embedding
size 512, 8 heads, MLP dimension 2,048, dropout and attention dropout 0.1. The table also states
"121M parameters" with the paper's joint 32K SentencePiece vocabulary, which these hyperparameters
do not give: a Transformer of that shape holds 44.1M parameters outside its embeddings, and
separate source, target and output matrices of 32,000 x 512 add 49.2M (93.3M in all with the
output bias; 60.6M with all three tied). 121M would need about 50K entries per matrix, so the
table's total probably counts something it does not list; the architecture follows the listed
hyperparameters. `small` and `tiny` train on a CPU in minutes (`tiny` on toy tasks in seconds).
"""

PRESETS: dict[str, dict] = {
    "base": {
        "num_encoder_layers": 6,
        "num_decoder_layers": 6,
        "hidden_dim": 512,
        "num_heads": 8,
        "intermediate_dim": 2048,
        "dropout": 0.1,
        "max_sequence_length": 256,
    },
    "small": {
        "num_encoder_layers": 3,
        "num_decoder_layers": 3,
        "hidden_dim": 256,
        "num_heads": 4,
        "intermediate_dim": 1024,
        "dropout": 0.1,
        "max_sequence_length": 256,
    },
    "tiny": {
        "num_encoder_layers": 2,
        "num_decoder_layers": 2,
        "hidden_dim": 128,
        "num_heads": 4,
        "intermediate_dim": 512,
        "dropout": 0.1,
        "max_sequence_length": 128,
    },
}
