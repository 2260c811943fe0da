"""hflm.inference and hflm.tiny on a tiny Qwen2 model built here (transformers backend, CPU).

    .venv-full/bin/python tasks/hflm-tests/test_inference.py
"""

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import types
import unittest
from unittest import mock

os.environ.setdefault("OMP_NUM_THREADS", "1")  # small and shared machines: one thread is enough here
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no progress bars between the test dots

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tasks/, for hflm

import torch  # noqa: E402

from hflm import gsm8k, humaneval, tiny  # noqa: E402
from hflm.inference import (  # noqa: E402
    GenerationParams, cut_at_stop, default_backend, end_token_ids, generate, tensor_parallel_size,
)
from hflm.model_dir import ModelFolderError  # noqa: E402
from transformers.utils import logging as transformers_logging  # noqa: E402

transformers_logging.disable_progress_bar()

TEXTS = [
    "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer: 3 + 4 = 7\nThe answer is 7\n",
    "def add(a, b):\n    return a + b\n",
    "Write a short poem about the sea. The waves roll in, the gulls cry out.",
] * 10
PROMPTS = ["Tom has 3 apples", [{"role": "user", "content": "How many apples?"}], "def add(a, b):"]
SHORT = GenerationParams(max_new_tokens=16)


def setUpModule():
    global ROOT, MODEL
    ROOT = tempfile.mkdtemp(prefix="hflm-test-")
    MODEL = tiny.build(os.path.join(ROOT, "model"), TEXTS, seed=3)


def tearDownModule():
    shutil.rmtree(ROOT, ignore_errors=True)


def copy_model(name):
    path = os.path.join(ROOT, name)
    shutil.copytree(MODEL, path)
    return path


class Tiny(unittest.TestCase):
    def test_the_same_texts_and_seed_give_the_same_files(self):
        again = tiny.build(os.path.join(ROOT, "again"), TEXTS, seed=3)
        other = tiny.build(os.path.join(ROOT, "other"), TEXTS, seed=4)
        self.assertEqual(sorted(os.listdir(again)), sorted(os.listdir(MODEL)))
        for name in os.listdir(MODEL):
            with open(os.path.join(MODEL, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                self.assertEqual(a.read(), b.read(), name)
        with open(os.path.join(MODEL, "model.safetensors"), "rb") as a, open(os.path.join(other, "model.safetensors"), "rb") as b:
            self.assertNotEqual(a.read(), b.read())

    def test_a_qwen2_model_of_a_few_hundred_thousand_parameters_in_safetensors(self):
        from transformers import AutoModelForCausalLM

        with open(os.path.join(MODEL, "config.json")) as f:
            self.assertEqual(json.load(f)["model_type"], "qwen2")
        self.assertTrue(os.path.exists(os.path.join(MODEL, "model.safetensors")))
        model = AutoModelForCausalLM.from_pretrained(MODEL)
        self.assertTrue(100_000 < sum(p.numel() for p in model.parameters()) < 1_000_000)

    def test_autotokenizer_encodes_as_the_trained_tokenizer(self):
        from tokenizers import Tokenizer
        from transformers import AutoTokenizer

        trained = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
        loaded = AutoTokenizer.from_pretrained(MODEL)
        for text in TEXTS[:3] + ["héllo wörld 123456 \t x <|im_end|>"]:
            self.assertEqual(loaded(text, add_special_tokens=False)["input_ids"], trained.encode(text).ids)
            self.assertEqual(loaded.decode(trained.encode(text).ids), text)

    def test_bad_texts_are_refused(self):
        with self.assertRaisesRegex(ValueError, "non-empty list of strings"):
            tiny.build(os.path.join(ROOT, "none"), [])


class Greedy(unittest.TestCase):
    def test_twice_the_same_texts_whatever_the_batch_size(self):
        first = generate(MODEL, PROMPTS, SHORT)
        self.assertEqual(len(first), len(PROMPTS))
        self.assertEqual(generate(MODEL, PROMPTS, SHORT), first)
        self.assertEqual(generate(MODEL, PROMPTS, SHORT, batch_size=1), first)
        self.assertTrue(any(first), "the tiny model should write something")

    def test_is_argmax_decoding_whatever_generation_config_json_suggests(self):
        # A checkpoint's generation_config.json may ask for sampling and a repetition penalty;
        # the reference's explicit settings (greedy, no penalty) win, as vLLM's SamplingParams do.
        path = copy_model("suggestive")
        with open(os.path.join(path, "generation_config.json")) as f:
            suggested = json.load(f)
        suggested.update(do_sample=True, temperature=0.7, top_k=3, repetition_penalty=1.8, min_new_tokens=10)
        with open(os.path.join(path, "generation_config.json"), "w") as f:
            json.dump(suggested, f)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(MODEL)
        model = AutoModelForCausalLM.from_pretrained(MODEL).eval()
        expected = []
        for prompt in PROMPTS:
            messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
            ids = tokenizer.encode(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
                                   add_special_tokens=False)
            new = []
            with torch.no_grad():
                for _ in range(SHORT.max_new_tokens):
                    token = int(model(torch.tensor([ids + new])).logits[0, -1].argmax())
                    if token == tokenizer.eos_token_id:
                        break
                    new.append(token)
            expected.append(tokenizer.decode(new, skip_special_tokens=True))
        self.assertEqual(generate(path, PROMPTS, SHORT), expected)

    def test_n_greedy_samples_are_n_copies(self):
        texts = generate(MODEL, PROMPTS[:2], GenerationParams(max_new_tokens=8, n=2))
        self.assertEqual(texts, [t for t in generate(MODEL, PROMPTS[:2], GenerationParams(max_new_tokens=8)) for _ in range(2)])


class Sampling(unittest.TestCase):
    def test_n_samples_per_prompt_in_prompt_order_reproducible_by_seed(self):
        params = GenerationParams(max_new_tokens=12, temperature=1.0, top_p=0.95, n=3, seed=11)
        texts = generate(MODEL, PROMPTS, params)
        self.assertEqual(len(texts), 3 * len(PROMPTS))
        self.assertEqual(generate(MODEL, PROMPTS, params), texts)
        self.assertNotEqual(generate(MODEL, PROMPTS, GenerationParams(max_new_tokens=12, temperature=1.0, n=3, seed=12)), texts)
        self.assertGreater(len(set(texts[:3])), 1, "three samples of a random model should differ")


class EndOfSequence(unittest.TestCase):
    def test_the_tokenizers_eos_and_generation_config_json_s(self):
        from transformers import AutoTokenizer

        path = copy_model("two-ends")
        tokenizer = AutoTokenizer.from_pretrained(path)
        self.assertEqual(end_token_ids(tokenizer, path), [tokenizer.eos_token_id])
        with open(os.path.join(path, "generation_config.json")) as f:
            config = json.load(f)
        config["eos_token_id"] = [tokenizer.eos_token_id, tokenizer.pad_token_id]  # as Qwen2.5-Instruct lists two
        with open(os.path.join(path, "generation_config.json"), "w") as f:
            json.dump(config, f)
        self.assertEqual(end_token_ids(tokenizer, path), sorted({tokenizer.eos_token_id, tokenizer.pad_token_id}))
        os.remove(os.path.join(path, "generation_config.json"))
        self.assertEqual(end_token_ids(tokenizer, path), [tokenizer.eos_token_id])


class StopStrings(unittest.TestCase):
    def test_the_text_ends_before_the_first_stop_string(self):
        self.assertEqual(cut_at_stop("a\nb\nQuestion: c", ("Question:", "\n")), "a")
        self.assertEqual(cut_at_stop("abc", ("x",)), "abc")
        self.assertEqual(cut_at_stop("abc", ()), "abc")
        self.assertEqual(cut_at_stop("xabc", ("x",)), "")

    def test_generation_stops_and_cuts_at_a_stop_string(self):
        params = GenerationParams(max_new_tokens=24, chat_template=False)
        full = generate(MODEL, PROMPTS[::2], params)
        # A stop string taken from inside the longest text, so that the cut lands after its start.
        longest = max(full, key=lambda t: len(set(t)))
        stop = next(longest[i : i + 2] for i in range(1, len(longest) - 1) if longest.find(longest[i : i + 2]) == i)
        cut = generate(MODEL, PROMPTS[::2], GenerationParams(max_new_tokens=24, chat_template=False, stop=[stop]))
        self.assertEqual(cut, [cut_at_stop(t, [stop]) for t in full])
        self.assertIn(longest[: longest.find(stop)], cut)
        self.assertTrue(all(stop not in t for t in cut))


class ChatTemplate(unittest.TestCase):
    def test_messages_are_rendered_by_the_tokenizers_template(self):
        messages = [{"role": "user", "content": "How many apples?"}, {"role": "assistant", "content": "7"},
                    {"role": "user", "content": "And pears?"}]
        by_hand = "<|im_start|>user\nHow many apples?<|im_end|>\n<|im_start|>assistant\n7<|im_end|>\n" \
                  "<|im_start|>user\nAnd pears?<|im_end|>\n<|im_start|>assistant\n"
        self.assertEqual(generate(MODEL, [messages], SHORT),
                         generate(MODEL, [by_hand], GenerationParams(max_new_tokens=16, chat_template=False)))

    def test_a_string_is_one_user_message(self):
        self.assertEqual(generate(MODEL, ["Tom has 3 apples"], SHORT),
                         generate(MODEL, [[{"role": "user", "content": "Tom has 3 apples"}]], SHORT))

    def test_messages_without_the_template_are_refused(self):
        with self.assertRaisesRegex(ValueError, "chat_template=True"):
            generate(MODEL, [PROMPTS[1]], GenerationParams(chat_template=False))

    def test_a_tokenizer_without_a_template_is_refused_when_one_is_needed(self):
        path = copy_model("no-template")
        os.remove(os.path.join(path, "chat_template.jinja"))
        with self.assertRaisesRegex(ValueError, "no chat template"):
            generate(path, ["hi"], SHORT)
        self.assertEqual(len(generate(path, ["hi"], GenerationParams(max_new_tokens=4, chat_template=False))), 1)


class GraderPath(unittest.TestCase):
    def test_gsm8k_and_humaneval_prompts_generate_and_grade(self):
        # The 4-shot chat is long for the tiny model's tokenizer; the point is that the pieces fit.
        params = dataclasses.replace(gsm8k.GENERATION, max_new_tokens=8)
        texts = generate(MODEL, [gsm8k.messages("Tom has 3 apples and buys 4 more. How many?")], params)
        self.assertIn(gsm8k.score(texts + ["The answer is 7"], ["#### 7", "#### 7"]), (50.0, 100.0))
        problem = {"prompt": "def one():\n", "test": "def check(f):\n    assert f() == 1\n", "entry_point": "one"}
        params = dataclasses.replace(humaneval.GENERATION, max_new_tokens=8)
        code = humaneval.extract_code(generate(MODEL, [humaneval.messages(problem)], params)[0])
        self.assertFalse(humaneval.run_program(humaneval.build_program(problem, code)))


class BadInput(unittest.TestCase):
    def test_model_folders_that_are_refused_say_what_to_do(self):
        missing = os.path.join(ROOT, "missing")
        with self.assertRaisesRegex(ModelFolderError, "not a folder"):
            generate(missing, ["hi"])
        no_config = copy_model("no-config")
        os.remove(os.path.join(no_config, "config.json"))
        with self.assertRaisesRegex(ModelFolderError, "no config.json.*save_pretrained"):
            generate(no_config, ["hi"])
        pickled = copy_model("pickled")
        os.rename(os.path.join(pickled, "model.safetensors"), os.path.join(pickled, "pytorch_model.bin"))
        with self.assertRaisesRegex(ModelFolderError, "pickled weights \\(pytorch_model.bin\\).*safetensors"):
            generate(pickled, ["hi"])
        adapter = copy_model("adapter")
        with open(os.path.join(adapter, "adapter_config.json"), "w") as f:
            f.write("{}")
        with self.assertRaisesRegex(ModelFolderError, "LoRA adapter.*merge_and_unload"):
            generate(adapter, ["hi"])
        remote = copy_model("remote-code")
        with open(os.path.join(remote, "config.json")) as f:
            config = json.load(f)
        config["auto_map"] = {"AutoModelForCausalLM": "modeling_x.X"}
        with open(os.path.join(remote, "config.json"), "w") as f:
            json.dump(config, f)
        with self.assertRaisesRegex(ModelFolderError, "trust_remote_code is never enabled"):
            generate(remote, ["hi"])

    def test_bad_prompts_and_params_are_refused(self):
        with self.assertRaisesRegex(ValueError, "prompt 0 must be a string or"):
            generate(MODEL, [[{"text": "hi"}]])
        with self.assertRaisesRegex(ValueError, "unknown backend"):
            generate(MODEL, ["hi"], SHORT, backend="onnx")
        for bad, message in [(dict(temperature=-1), "temperature"), (dict(top_p=0), "top_p"), (dict(n=0), "n must"),
                             (dict(max_new_tokens=0), "max_new_tokens"), (dict(stop="\n"), "stop must be a list")]:
            with self.assertRaisesRegex(ValueError, message):
                GenerationParams(**bad)
        self.assertEqual(generate(MODEL, []), [])


class Backends(unittest.TestCase):
    def test_transformers_without_cuda(self):
        if not torch.cuda.is_available():
            self.assertEqual(default_backend(), "transformers")

    def test_the_vllm_backend_passes_what_vllms_api_takes_and_shuts_its_one_engine_down(self):
        # No GPU here: a stand-in vllm module records the calls (vLLM itself runs only on a GPU host).
        calls = {"engines": 0, "shutdowns": 0}

        class LLM:
            def __init__(self, **kwargs):
                calls["llm"], calls["engines"] = kwargs, calls["engines"] + 1
                shutdown = lambda: calls.update(shutdowns=calls["shutdowns"] + 1)  # noqa: E731
                self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=shutdown))

            def generate(self, prompts, sampling):
                calls["prompts"], calls["sampling"] = prompts, sampling
                return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"{i} a\nQuestion: b")
                                                       for _ in range(sampling.kwargs["n"])])
                        for i, _ in enumerate(prompts)]

        class SamplingParams:
            def __init__(self, **kwargs):
                self.kwargs = kwargs

        fake = types.SimpleNamespace(LLM=LLM, SamplingParams=SamplingParams)
        params = GenerationParams(max_new_tokens=7, stop=["\nQuestion:"], n=2)
        # 3 GPUs of compute capability 9.0: tensor parallel 2 (a power of 2 dividing the tiny model's 4 heads), bfloat16.
        with mock.patch.dict(sys.modules, {"vllm": fake}), mock.patch("torch.cuda.device_count", return_value=3), \
                mock.patch("hflm.gpu.capabilities", return_value=[(9, 0)] * 3):
            texts = generate(MODEL, PROMPTS[:2], params, backend="vllm")
        self.assertEqual(texts, ["0 a", "0 a", "1 a", "1 a"])
        self.assertEqual(calls["llm"], dict(model=MODEL, tensor_parallel_size=2, dtype="bfloat16",
                                            trust_remote_code=False, seed=0))
        self.assertEqual((calls["engines"], calls["shutdowns"]), (1, 1))
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(MODEL)
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": PROMPTS[0]}], tokenize=False,
                                                 add_generation_prompt=True)
        self.assertEqual(calls["prompts"][0], {"prompt_token_ids": tokenizer.encode(rendered, add_special_tokens=False)})
        self.assertEqual(calls["sampling"].kwargs, dict(
            n=1, temperature=0.0, top_p=1.0, max_tokens=7, stop=["\nQuestion:"],
            stop_token_ids=[tokenizer.eos_token_id], seed=0, skip_special_tokens=True,
        ))

        # A pre-Ampere GPU (compute capability 7.5) has no bfloat16: float16; and a failed generate still shuts down.
        def fail(self, prompts, sampling):
            raise RuntimeError("CUDA out of memory")

        with mock.patch.dict(sys.modules, {"vllm": fake}), mock.patch("torch.cuda.device_count", return_value=1), \
                mock.patch("hflm.gpu.capabilities", return_value=[(7, 5)]), mock.patch.object(LLM, "generate", fail):
            with self.assertRaisesRegex(RuntimeError, "out of memory"):
                generate(MODEL, PROMPTS[:1], params, backend="vllm")
        self.assertEqual(calls["llm"]["dtype"], "float16")
        self.assertEqual((calls["engines"], calls["shutdowns"]), (2, 2))

    def test_tensor_parallel_is_the_largest_power_of_2_of_the_gpus_that_divides_the_heads(self):
        self.assertEqual([tensor_parallel_size(g) for g in range(10)], [1, 1, 2, 2, 4, 4, 4, 4, 8, 8])
        # Qwen2.5-1.5B: 12 heads, 2 key/value heads; Qwen2.5-0.5B: 14 and 2; Qwen2.5-7B: 28 and 4; Llama-3-8B: 32 and 8.
        self.assertEqual([tensor_parallel_size(8, h, kv) for h, kv in [(12, 2), (14, 2), (28, 4), (32, 8)]], [4, 2, 4, 8])
        self.assertEqual(tensor_parallel_size(3, 12, 2), 2)
        self.assertEqual(tensor_parallel_size(8, 12, 3), 1)  # 3 key/value heads: no power of 2 above 1 fits both


if __name__ == "__main__":
    unittest.main()
