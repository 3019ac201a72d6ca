"""GGUF export for llama.cpp and Ollama, written with the ``gguf`` package and no llama.cpp checkout.

architectures: the supported families and the plan check (standard library only); quant_types: the tensor
types offered; hparams, tokenizer, tensors: the file's metadata and weights; modelfile: the Ollama Modelfile;
writer: a model folder to a .gguf file, and a run to an export folder.
"""
