// Links libtorch through find_package(Torch) and runs one tensor operation on the CPU.
#include <torch/torch.h>

#include <iostream>

int main() {
    torch::Tensor t = torch::ones({2, 3});
    std::cout << "torch_smoke: sum=" << t.sum().item<float>() << std::endl;
    return t.sum().item<float>() == 6.0f ? 0 : 1;
}
