#!/bin/sh
# Every cancellation point a softhca library calls goes through its
# link-time wrapper (src/common/sys.c, NOCANCEL): a posting verb marks the
# thread as inside (common/nocancel.h) instead of turning cancellation
# off, and relies on each such call doing it for itself.  So no libc
# cancellation point may be imported unwrapped.
#   check_cancel_points.sh LIBRARY WRAPPED-NAME...
# The list: glibc's cancellation points (pthreads(7): those that are and
# those that may be, as far as a library calls them; with their
# _FORTIFY_SOURCE forms, which a fortified build would import), and the calls
# sys.c's own wrappers make (__read, ...: cancellation points too,
# imported for the wrappers alone).
set -eu
lib=$1
shift
points='accept accept4 aio_suspend clock_nanosleep close connect creat
epoll_pwait epoll_pwait2 epoll_wait fallocate fcntl fcntl64 fdatasync
fsync getrandom lockf mq_receive mq_send mq_timedreceive mq_timedsend
msgrcv msgsnd msync nanosleep open open64 openat openat64 pause poll
ppoll pread pread64 preadv preadv2 preadv64 pselect
pthread_cond_clockwait pthread_cond_timedwait pthread_cond_wait
pthread_join pthread_testcancel pthread_timedjoin_np pwrite pwrite64
pwritev pwritev2 read readv recv recvfrom recvmmsg recvmsg select
sem_clockwait sem_timedwait sem_wait send sendmmsg sendmsg sendto
sigpause sigsuspend sigtimedwait sigwait sigwaitinfo sleep
sync_file_range system tcdrain usleep wait wait3 wait4 waitid waitpid
write writev
fopen fopen64 fdopen freopen fclose fcloseall fflush fflush_unlocked
fgetc fgets fgetwc fgetws fputc fputs fputwc fputws fread fwrite
fprintf vfprintf printf vprintf dprintf vdprintf putc putchar puts
getc getchar getline getdelim fscanf __isoc99_fscanf vfscanf scanf
__isoc99_scanf getaddrinfo getnameinfo
gethostbyname gethostbyname_r getifaddrs getpwuid getpwuid_r getpwnam
getpwnam_r getgrgid_r syslog vsyslog dlopen catopen tmpfile mkstemp
opendir fdopendir closedir readdir readdir_r rewinddir seekdir telldir
scandir ftw nftw popen pclose
__open_2 __open64_2 __openat_2 __openat64_2 __read_chk __pread_chk
__pread64_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk
__fgets_chk __fprintf_chk __vfprintf_chk __printf_chk __vprintf_chk
__dprintf_chk __vdprintf_chk'
# what sys.c's wrappers themselves call (alias:the wrapped name)
aliases='__read:read __write:write __close:close __poll:poll
__connect:connect __send:send __fcntl:fcntl __select:select
__isoc99_vfscanf:__isoc99_fscanf'

nm -D --undefined-only "$lib" | awk '{print $2}' | sed 's/@.*//' | sort -u >"${TMPDIR:-/tmp}/cancel.$$"
trap 'rm -f "${TMPDIR:-/tmp}/cancel.$$"' EXIT
status=0
n=0
for sym in $(cat "${TMPDIR:-/tmp}/cancel.$$"); do
	case " $(echo $points) " in *" $sym "*) ;; *) continue ;; esac
	n=$((n + 1))
	wrapped=no
	for w in "$@"; do
		[ "$w" = "$sym" ] && wrapped=yes
	done
	# the readers of a directory call no cancellation point in glibc
	# (its own nocancel calls); they are listed as "may be" only
	case $sym in opendir|fdopendir|closedir|readdir) wrapped=dir ;; esac
	if [ $wrapped = no ]; then
		echo "FAIL: $lib imports $sym, a cancellation point, unwrapped" >&2
		status=1
	fi
done
for pair in $aliases; do
	a=${pair%%:*}
	plain=${pair#*:}
	grep -qx "$a" "${TMPDIR:-/tmp}/cancel.$$" || continue
	n=$((n + 1))
	ok=no
	for w in "$@"; do
		[ "$w" = "$plain" ] && ok=yes
	done
	if [ $ok = no ]; then
		echo "FAIL: $lib imports $a but does not wrap $plain" >&2
		status=1
	fi
done
[ $status = 0 ] && echo "ok: $n cancellation points imported by $lib, each wrapped"
exit $status
