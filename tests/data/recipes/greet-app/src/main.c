#include <stdio.h>
#include <greet.h>

int main(int argc, char **argv) {
    char buf[256];
    greet(argc > 1 ? argv[1] : "app", buf, sizeof buf);
    printf("greet-app: %s [libgreet %s]\n", buf, greet_version());
    return 0;
}
