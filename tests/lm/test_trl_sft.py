"""TRL's ``SFTTrainer`` takes a demonstrations file (``rbjax lm demos``) unchanged and trains on it on a CPU.

No model can be fetched here, so the model is made on the spot: a byte-level BPE tokenizer trained on the
file's own text, with a chat template that writes the tools, the tool calls and the tool messages, and a
two-layer Qwen2 of random weights. The file is loaded with ``datasets.load_dataset("json", ...)`` as a trainer
would; the loss must be finite and fall over a few passes on a small repeated set. Skipped without TRL and torch
(CI runs it in the TRL face's environment, ``.venv-trl``, where ``RBJAX_TEST_ENV=trl`` makes a missing TRL fail).
"""

import json
import os

import pytest

if os.environ.get("RBJAX_TEST_ENV") != "trl":
    pytest.importorskip("trl")
    pytest.importorskip("torch")

pytestmark = pytest.mark.slow  # a slices run, the oracle's demonstrations, a few training steps

TEMPLATE = (
    "{% if tools %}<|tools|>{{ tools | tojson }}<|end|>{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] %}{{ m['content'] }}{% endif %}"
    "{% if m['tool_calls'] %}{% for c in m['tool_calls'] %}<call>{{ c['function'] | tojson }}</call>{% endfor %}"
    "{% endif %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def demos_file(tasks, tmp_path_factory):
    from rbjax.lm.demos import demonstrate, write_rows

    path = tmp_path_factory.mktemp("demos") / "demos.jsonl"
    write_rows(demonstrate(tasks, "oracle"), str(path))
    return path


def float32_equal(a, b) -> bool:
    """Whether two JSON values are equal, numbers compared as float32."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(float32_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(float32_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        import numpy as np

        return bool(np.float32(a) == np.float32(b))
    return a == b


def tiny_model(texts):
    """(tokenizer, model): a BPE of 512 tokens trained on ``texts`` and a 2-layer Qwen2 over it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    special = ["<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|tool|>", "<|system|>", "<|tools|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=512, special_tokens=special))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<|pad|>", eos_token="<|end|>")
    tok.chat_template = TEMPLATE
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=True,
    )  # fmt: skip
    return tok, Qwen2ForCausalLM(config)


def test_sft_trainer_trains_on_the_demonstrations_file_unchanged(demos_file, tmp_path):
    import torch
    from datasets import load_dataset
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(0)
    dataset = load_dataset("json", data_files=str(demos_file))["train"]
    assert {"messages", "tools"} <= set(dataset.column_names)
    rows = [json.loads(line) for line in demos_file.read_text().splitlines()]
    tok, model = tiny_model(
        [m["content"] for r in rows for m in r["messages"]] + [json.dumps(r["tools"]) for r in rows]
    )
    # the dataset holds the file's rows: each call its own arguments (datasets reads the messages as Json), the
    # tools as they are; a price may come back with float64 digits added (0.85999995 as 0.8599999500000001),
    # the same float32, so the same action
    assert dataset[0]["tools"] == rows[0]["tools"]
    assert float32_equal(dataset[0]["messages"], rows[0]["messages"])
    assert tok.apply_chat_template(dataset[0]["messages"], tools=dataset[0]["tools"], tokenize=False).count(
        "<call>"
    ) == sum(rows[0]["calls_per_day"])
    config = SFTConfig(
        output_dir=str(tmp_path / "out"), max_steps=20, per_device_train_batch_size=2, learning_rate=5e-3,
        max_length=1024, logging_steps=1, report_to="none", save_strategy="no", use_cpu=True, bf16=False,
        lr_scheduler_type="constant",
    )  # fmt: skip
    trainer = SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tok)
    trainer.train()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 20 and all(x == x and x < float("inf") for x in losses), losses
    assert sum(losses[-3:]) / 3 < 0.7 * sum(losses[:3]) / 3, losses  # the same two rows, seen ten times
