/* Multiboot v1 header and entry of pvhboot. */
	.section .multiboot, "a"
	.align 4
	.long 0x1BADB002
	.long 0x00000003               /* page-align modules, memory map */
	.long -(0x1BADB002 + 0x00000003)
	.text
	.globl _start
_start:
	cli
	mov $stack_top, %esp
	push %ebx                      /* multiboot info */
	push %eax                      /* magic */
	call pvhboot_main
1:	hlt
	jmp 1b
	.bss
	.align 16
	.space 16384
stack_top:
