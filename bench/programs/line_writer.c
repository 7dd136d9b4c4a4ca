// Writes SIZE bytes of LEN-byte lines ('\n' included) to PATH, or to stdout
// when PATH is "-", in 1 MB blocks: the same writer for the direct baseline
// and under drun.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char** argv) {
  if (argc != 4) { fprintf(stderr, "usage: line_writer SIZE LEN PATH|-\n"); return 2; }
  long long size = atoll(argv[1]);
  int len = atoi(argv[2]);
  int fd = strcmp(argv[3], "-") == 0 ? 1 : open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) { perror(argv[3]); return 1; }
  int per_block = 1000000 / len;
  size_t block_len = (size_t)per_block * len;
  char* block = malloc(block_len);
  for (int i = 0; i < per_block; ++i) {
    char* l = block + (size_t)i * len;
    memset(l, 'a' + i % 26, len - 1);
    int n = snprintf(l, len, "line %07d ", i);
    l[n] = ' ';
    l[len - 1] = '\n';
  }
  for (long long done = 0; done < size;) {
    size_t want = size - done < (long long)block_len ? (size_t)(size - done) : block_len;
    ssize_t w = write(fd, block, want);
    if (w <= 0) { perror("write"); return 1; }
    done += w;
  }
  return 0;
}
