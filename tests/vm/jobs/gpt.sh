# wh-gpt (bf16 mixed precision through the drop-in libcublasLt) inside the
# guest, forwarded through ivshmem: 60 steps from the fixed seed; the
# validation loss must fall from about 4.57 to below 3.2 (the host run and
# its fp32 reference end near 2.73: train.gpt_forwarded_sim).
wh_expect gpt_val_loss 'wh-gpt summary: steps=60 val_loss=(2\.[0-9]+|3\.[01][0-9]*) \(start 4\.' \
  wh-gpt --steps 60 --eval-every 20 --val-batches 2 --sample 80 --seed 1337 --quiet
wh_exit
