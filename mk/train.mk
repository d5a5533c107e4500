# The training workload: make demo, make bench-train, and the training part
# of make test-gpu. Included by the top Makefile.
#   make demo          build, start wormhole-server (--backend auto), train the
#                      LeNet-5-like CNN (wh-cnn: cuDNN + cuBLAS) on Fashion-MNIST
#                      through the drop-ins with a progress bar, print its test
#                      accuracy, write its loss plot (build/wh-cnn-loss.png),
#                      show the server's statistics, stop the server
#                      (DEMO_ARGS: wh-cnn arguments; DEMO_BACKEND=auto|sim|cuda)
#   make demo-mlp      the same for wh-train, the Fashion-MNIST MLP (cuBLAS)
#   make demo-cnn      the same as make demo
#   make bench-train   fixed steps of the MLP, the CNN and the GPT forwarded
#                      (+ native with a GPU); one line per model:
#                      <model>_step_ms=.. native_step_ms=.. calls_per_step=.. steps_per_s=.. backend=..
#   make bench-train-vm  the same steps inside a TCG guest against the sim
#                      backend, and from a host process in the same run; one line:
#                      vm_mlp_step_ms=.. host_mlp_step_ms=.. ... accel=..
#   make test-gpu-train  MLP, CNN and GPT native vs forwarded on a GPU (loss curves,
#                      step time within 5%); exits 2 without a GPU
DEMO_ARGS ?=
DEMO_MLP_ARGS ?=
DEMO_CNN_ARGS ?= $(DEMO_ARGS)

.PHONY: demo demo-cnn demo-mlp demo-torch bench-train bench-train-vm test-gpu-train

demo: demo-cnn

demo-cnn: build
	@tests/train/demo.sh $(BUILD) cnn $(DEMO_CNN_ARGS)

demo-mlp: build
	@tests/train/demo.sh $(BUILD) mlp $(DEMO_MLP_ARGS)

# PyTorch from PyPI (about 3 GB, downloaded once) training an MLP with
# torch.compile through Wormhole (docs/pytorch.md).
demo-torch: build
	@tests/torch/demo.sh $(BUILD) $(DEMO_TORCH_ARGS)

# PyTorch through Wormhole against torch on the CPU: a small op, MLP and CNN
# steps, with calls per step (docs/benchmarks.md).
bench-torch: build
	@tests/torch/bench.sh $(BUILD)

bench-train: build
	@tests/train/bench.sh $(BUILD)

bench-train-vm: guest-image
	@tests/train/bench_vm.sh $(BUILD) $(VM_IMAGE)

test-gpu-train: build
	@tests/train/gpu_train.sh $(BUILD)
